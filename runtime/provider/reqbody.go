package provider

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
)

// A request to a model server is the size of the chat's history (tens of
// kilobytes late in a long chat) and is sent every turn. net/http writes a
// body of known length through an io.LimitedReader, which hides the body's
// WriteTo: the connection's ReadFrom then copied it through a fresh buffer
// of up to 32 KiB per request (a tenth of a turn's garbage under load).
// The client's connections recognise the body instead and write what the
// transport's buffer did not take in one call, from the body's own bytes.

// requestBody is a request's JSON, readable as a body any number of times
// (GetBody gives a new one for a retry).
type requestBody struct {
	bytes.Reader
}

func newRequestBody(b []byte) *requestBody {
	r := &requestBody{}
	r.Reset(b)
	return r
}

// Close does nothing: the bytes are the caller's.
func (*requestBody) Close() error { return nil }

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
