package provider

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// A request to a model server is the size of the chat's history (tens of
// kilobytes late in a long chat) and is sent every turn. net/http writes a
// body of known length through an io.LimitedReader, which hides the body's
// WriteTo: the connection's ReadFrom then copied it through a fresh buffer
// of up to 32 KiB per request (a tenth of a turn's garbage under load).
// The client's connections recognise the body instead and write what the
// transport's buffer did not take in one call, from the body's own bytes.

// Body is a request's JSON built in a buffer from a pool. The buffer goes
// back to the pool when its last holder lets go: the poster once the
// client returned (no retry or redirect asks for the body after that) and
// each body reader the transport was given once it is closed (the
// transport may still be writing one after the response arrived). A
// request is the size of the chat's history, and its buffer was most of
// a turn's garbage.
type Body struct {
	buf  bytes.Buffer
	refs atomic.Int32
	// released, when set (by tests), is called as the last hold is let go.
	released func()
}

// maxPooledBody bounds a buffer kept for reuse: a request with a large
// attachment gives its buffer to the collector, not to every later turn.
const maxPooledBody = 4 << 20

var bodies = sync.Pool{New: func() any { return new(Body) }}

// NewBody returns an empty body, held once by the caller: it is given to
// Poster.PostBody, or let go with Release.
func NewBody() *Body {
	b := bodies.Get().(*Body)
	b.refs.Store(1)
	return b
}

// Buffer is where the request is written, before the body is posted.
func (b *Body) Buffer() *bytes.Buffer { return &b.buf }

// Bytes is the request as written so far.
func (b *Body) Bytes() []byte { return b.buf.Bytes() }

// hold adds a holder.
func (b *Body) hold() { b.refs.Add(1) }

// Release lets go of one hold; the last returns the buffer to the pool.
func (b *Body) Release() {
	switch n := b.refs.Add(-1); {
	case n > 0:
	case n == 0:
		if b.released != nil {
			b.released()
			b.released = nil
		}
		if b.buf.Cap() > maxPooledBody {
			return
		}
		b.buf.Reset()
		bodies.Put(b)
	default:
		panic("provider: request body released more often than held")
	}
}

// errBodyClosed is what a pooled body reader returns once closed: its
// bytes may be another request's by then.
var errBodyClosed = errors.New("provider: request body read after close")

// requestBody is a request's JSON, readable as a body any number of times
// (GetBody gives a new one for a retry). A reader of a pooled Body holds
// it until closed and its last read returned, whichever comes later; the
// transport may close it while another of its goroutines reads it.
type requestBody struct {
	// rd is a field, not embedded: its other methods (ReadAt, Seek, ...)
	// would read past the guard.
	rd     bytes.Reader
	owner  *Body // nil: the caller's bytes, never released
	mu     sync.Mutex
	active int  // reads in progress
	closed bool // Close was called
}

func newRequestBody(b []byte) *requestBody {
	r := &requestBody{}
	r.rd.Reset(b)
	return r
}

// newPooledBody is a reader of owner's bytes, holding owner.
func newPooledBody(owner *Body) *requestBody {
	owner.hold()
	r := &requestBody{owner: owner}
	r.rd.Reset(owner.Bytes())
	return r
}

// enter starts a read; false when the reader is closed.
func (r *requestBody) enter() bool {
	if r.owner == nil {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.active++
	return true
}

// leave ends a read, letting go of the body if it was closed meanwhile.
func (r *requestBody) leave() {
	if r.owner == nil {
		return
	}
	r.mu.Lock()
	r.active--
	last := r.closed && r.active == 0
	r.mu.Unlock()
	if last {
		r.owner.Release()
	}
}

func (r *requestBody) Read(p []byte) (int, error) {
	if !r.enter() {
		return 0, errBodyClosed
	}
	defer r.leave()
	return r.rd.Read(p)
}

func (r *requestBody) WriteTo(w io.Writer) (int64, error) {
	if !r.enter() {
		return 0, errBodyClosed
	}
	defer r.leave()
	return r.rd.WriteTo(w)
}

// Len is how many bytes are left to read; it reads no body byte.
func (r *requestBody) Len() int { return r.rd.Len() }

// Close lets go of a pooled body (once its reads end); the caller's bytes
// stay the caller's.
func (r *requestBody) Close() error {
	if r.owner == nil {
		return nil
	}
	r.mu.Lock()
	last := !r.closed && r.active == 0
	r.closed = true
	r.mu.Unlock()
	if last {
		r.owner.Release()
	}
	return nil
}

// bodyConn is a connection to a model server that writes a requestBody
// directly, and anything else through a pooled buffer.
type bodyConn struct {
	net.Conn
}

// copyBufs are the buffers bodyConn copies other bodies through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ReadFrom is what net/http's transport calls with a request's body (after
// its buffered writer took the headers and the body's first bytes).
func (c *bodyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		// Len is read outside the body's guard: a closed pooled body
		// refuses the write that follows, whatever it said.
		if b, ok := lr.R.(*requestBody); ok && int64(b.Len()) <= lr.N {
			n, err := b.WriteTo(c.Conn)
			lr.N -= n
			return n, err
		}
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	// The wrapper hides the connection's own ReadFrom, which would copy
	// through a buffer of its own.
	return io.CopyBuffer(struct{ io.Writer }{c.Conn}, r, *buf)
}

// dialBodyConn dials with d and wraps the connection in a bodyConn.
func dialBodyConn(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &bodyConn{Conn: c}, nil
	}
}
