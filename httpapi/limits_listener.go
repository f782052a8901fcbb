package httpapi

import (
	"net"
	"net/netip"
	"sync"
)

// Listener caps the connections accepted from ln: past Connections,
// Accept waits until one closes (the caller waits in the kernel's
// backlog and costs this process nothing); a client address already
// holding ConnectionsPerAddress has its new connection closed at once.
// A nil *Limits returns ln.
func (l *Limits) Listener(ln net.Listener) net.Listener {
	if l == nil || (l.o.Connections <= 0 && l.o.ConnectionsPerAddress <= 0) {
		return ln
	}
	c := &limitListener{Listener: ln, l: l, done: make(chan struct{}), perAddr: map[netip.Addr]int{}}
	if l.o.Connections > 0 {
		c.slots = make(chan struct{}, l.o.Connections)
	}
	return c
}

type limitListener struct {
	net.Listener
	l     *Limits
	slots chan struct{} // one token per open connection; nil: no cap
	done  chan struct{}
	once  sync.Once

	mu      sync.Mutex
	perAddr map[netip.Addr]int // open connections per client key; never more keys than open connections
}

func (ln *limitListener) Accept() (net.Conn, error) {
	for {
		if !ln.take() {
			return nil, net.ErrClosed
		}
		c, err := ln.Listener.Accept()
		if err != nil {
			ln.give()
			return nil, err
		}
		key, exempt := ln.l.client(c.RemoteAddr().String())
		if ln.l.o.ConnectionsPerAddress > 0 && !exempt {
			ln.mu.Lock()
			over := ln.perAddr[key] >= ln.l.o.ConnectionsPerAddress
			if !over {
				ln.perAddr[key]++
			}
			ln.mu.Unlock()
			if over {
				ln.l.Refuse(ReasonConnections, key)
				_ = c.Close()
				ln.give()
				continue
			}
		} else {
			exempt = true
		}
		ln.l.conns.Add(1)
		return &limitConn{Conn: c, ln: ln, key: key, counted: !exempt}, nil
	}
}

// take waits for a connection slot; false once the listener is closed.
func (ln *limitListener) take() bool {
	if ln.slots == nil {
		return true
	}
	select {
	case ln.slots <- struct{}{}:
		return true
	default:
	}
	ln.l.waits.Add(1)
	select {
	case ln.slots <- struct{}{}:
		return true
	case <-ln.done:
		return false
	}
}

func (ln *limitListener) give() {
	if ln.slots != nil {
		<-ln.slots
	}
}

func (ln *limitListener) Close() error {
	ln.once.Do(func() { close(ln.done) })
	return ln.Listener.Close()
}

type limitConn struct {
	net.Conn
	ln      *limitListener
	key     netip.Addr
	counted bool // in ln.perAddr
	once    sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		if c.counted {
			c.ln.mu.Lock()
			if c.ln.perAddr[c.key]--; c.ln.perAddr[c.key] <= 0 {
				delete(c.ln.perAddr, c.key)
			}
			c.ln.mu.Unlock()
		}
		c.ln.l.conns.Add(-1)
		c.ln.give()
	})
	return err
}
