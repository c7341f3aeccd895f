package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// The HTTP server's limits on slow and many clients (issue 16: a POST
// sending its body at 1 byte/s held a connection as long as it liked, idle
// keep-alives stayed 180 s, and there was no connection cap). The agent
// serves with HTTPServer and LimitListener; tests inject shorter ones.
const (
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout = 5 * time.Second
	// ReadTimeout bounds reading a whole request, body included: a body
	// of MaxRequestBody must arrive at 140 kB/s or more, a booking's
	// (MaxSmallBody) at 550 bytes/s.
	ReadTimeout = 30 * time.Second
	// WriteTimeout bounds a request from the end of its headers to the end
	// of the answer: above a guarded write's longest wait in the store's
	// queue (store.WriteQueueWait, 10 s) plus its token check and writes.
	WriteTimeout = 45 * time.Second
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout = 60 * time.Second
	// MaxConns is the most connections the server holds open at once
	// (LimitListener); one more waits in the kernel's accept queue until
	// one closes.
	MaxConns = 512
	// MaxSmallBody bounds the body of every request but a tree write and
	// a job preview (a booking, a move, a scale, a cancel, a login: under
	// 1 kB in practice).
	MaxSmallBody = 16 << 10
)

// HTTPLimits are the server's timeouts; zero fields take the constants
// above.
type HTTPLimits struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// HTTPServer returns the http.Server the agent serves h with: every
// timeout set (ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout,
// or lim's when set).
func HTTPServer(h http.Handler, lim HTTPLimits) *http.Server {
	pick := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	return &http.Server{Handler: h,
		ReadHeaderTimeout: pick(lim.ReadHeader, ReadHeaderTimeout),
		ReadTimeout:       pick(lim.Read, ReadTimeout),
		WriteTimeout:      pick(lim.Write, WriteTimeout),
		IdleTimeout:       pick(lim.Idle, IdleTimeout),
	}
}

// bodyLimit is the largest body a request may send: MaxRequestBody for a
// tree write (PUT /v1/quotas) and a job preview (POST /v1/plan), else
// MaxSmallBody.
func bodyLimit(r *http.Request) int64 {
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/v1/quotas",
		r.Method == http.MethodPost && r.URL.Path == "/v1/plan":
		return MaxRequestBody
	}
	return MaxSmallBody
}

// limitBodies applies bodyLimit before anything else runs, the token check
// included: a declared Content-Length above it is a 413 at once, nothing
// read; a body that grows past it (chunked) fails its read with
// *http.MaxBytesError, which readBody answers with 413, and the server
// then closes the connection.
func limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		max := bodyLimit(r)
		if r.ContentLength > max {
			w.Header().Set("Connection", "close")
			writeError(w, bodyTooLarge(r, max))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, max)
		next.ServeHTTP(w, r)
	})
}

func bodyTooLarge(r *http.Request, max int64) *Problem {
	return &Problem{Status: http.StatusRequestEntityTooLarge, Field: "body",
		Msg: fmt.Sprintf("body larger than %d bytes, the most %s %s takes", max, r.Method, r.URL.Path)}
}

// readBodyErr maps a failed body read: past the limit 413, else 400.
func readBodyErr(r *http.Request, err error) *Problem {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return bodyTooLarge(r, mbe.Limit)
	}
	return &Problem{Status: http.StatusBadRequest, Field: "body", Msg: "reading the body: " + err.Error()}
}

// LimitListener returns l accepting at most n connections open at once
// (MaxConns in the agent): Accept waits while n are open, until one
// closes.
func LimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, free: func() { <-l.slots }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
