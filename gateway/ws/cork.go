package ws

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// corkLimit is the most a corked socket holds before it writes anyway, so
// merging frames never holds more than this per socket (a replay page can
// be much bigger: it goes out in pieces of about this size).
const corkLimit = 64 << 10

// corkConn is the socket under gorilla's Conn. Corked, it collects the
// frames gorilla writes instead of writing each at once, and uncork sends
// them in one write: the writer corks around a batch of queued frames, so a
// writer that fell behind sends what piled up in one system call instead
// of one per frame. Every frame is still whole and in order, because
// gorilla hands over one frame per Write under its own lock, and this
// conn's lock keeps a pass-through write (a pong from the read loop) from
// overtaking collected bytes.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
	writes int // writes to the socket, for tests
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, p...)
		if len(c.buf) < corkLimit {
			return len(p), nil
		}
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	c.writes++
	return c.Conn.Write(p)
}

// cork starts collecting writes.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was collected, in one write, and stops collecting.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if len(c.buf) == 0 {
		return nil
	}
	c.writes++
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > corkLimit*2 {
		c.buf = nil // a rare big batch does not stay held
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

// corkingWriter hands the upgrader a corkConn when it hijacks the socket.
type corkingWriter struct {
	http.ResponseWriter
	conn *corkConn
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: nc}
	return w.conn, brw, nil
}
