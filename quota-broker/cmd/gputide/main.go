// Command gputide is the gputide CLI: the quota broker's command line
// (gputide plan, gputide version, ...). It only wires the process to
// package command.
package main

import (
	"os"

	"github.com/gputide/gputide/quota-broker/command"
)

func main() {
	os.Exit(command.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
