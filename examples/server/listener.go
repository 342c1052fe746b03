package main

import (
	"net"
	"sync"
)

// limitListener holds at most cap(slots) connections open at once: past
// them, Accept waits for one to close, so a flood of connections waits in
// the kernel's backlog rather than holding the process's descriptors.
// (golang.org/x/net/netutil.LimitListener does the same.)
type limitListener struct {
	net.Listener
	slots  chan struct{} // a token per open connection
	closed chan struct{} // closed by Close: Accept stops waiting
	once   sync.Once
}

// limitConns lets ln hold at most n connections open at once.
func limitConns(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
}

// Close stops listening, and Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// slotConn frees its slot when it is first closed.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
