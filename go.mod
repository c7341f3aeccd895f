module github.com/gputide/gputide

go 1.26.8
