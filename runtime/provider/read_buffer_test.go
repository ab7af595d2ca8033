package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// readsCounted is a TCP connection that counts the reads that returned
// bytes.
type readsCounted struct {
	*net.TCPConn
	reads *atomic.Int64
}

func (c readsCounted) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	if n > 0 {
		c.reads.Add(1)
	}
	return n, err
}

// TestAnswerIsOneRead: a streamed answer of the usual size (33 events,
// about 6 KiB with its chunk framing) that has arrived whole is read off
// the connection in one read, not in net/http's default 4 KiB ones.
func TestAnswerIsOneRead(t *testing.T) {
	var answer bytes.Buffer
	for i := range 33 {
		fmt.Fprintf(&answer, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"words %d \"},\"finish_reason\":null}]}\n\n", i)
	}
	answer.WriteString("data: [DONE]\n\n")
	// The whole answer in one write: its head, then the events as the
	// chunks a streaming server sends, one per event.
	var raw bytes.Buffer
	raw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	for ev := range strings.SplitAfterSeq(answer.String(), "\n\n") {
		if ev != "" {
			fmt.Fprintf(&raw, "%x\r\n%s\r\n", len(ev), ev)
		}
	}
	raw.WriteString("0\r\n\r\n")
	if raw.Len() <= 4<<10 || raw.Len() > ReadBufferSize {
		t.Fatalf("the answer is %d bytes, want one over 4 KiB that fits the read buffer", raw.Len())
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, bufw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		bufw.Flush()
		conn.Write(raw.Bytes())
	}))
	defer srv.Close()

	var reads atomic.Int64
	tr := NewHTTPClient(0).Transport.(*http.Transport).Clone()
	d := &net.Dialer{}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &bodyConn{Conn: readsCounted{c.(*net.TCPConn), &reads}}, nil
	}
	defer tr.CloseIdleConnections()
	p := Poster{Name: "t", Client: &http.Client{Transport: tr}}
	resp, err := p.Post(context.Background(), srv.URL, http.Header{}, []byte(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Close()
	if err != nil || !bytes.Equal(got, answer.Bytes()) {
		t.Fatalf("read %d bytes (%v), want the %d of the answer", len(got), err, answer.Len())
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("the answer took %d reads, want 1", n)
	}
}
