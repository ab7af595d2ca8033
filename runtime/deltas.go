package runtime

import (
	"strings"
	"sync"
)

// deltaPump hands a model's streamed text to a turn's onDelta without
// holding the stream up: the provider's emit returns at once, and text
// that arrives while the previous call to onDelta has not returned yet is
// joined into the next one. A chat takes each delta on its own goroutine,
// and while it commits a turn's start it takes none: a fast model's
// pieces then waited in line, one hand-over each, and reached the chat
// one by one after the commit (25 of them for the built-in model's
// answer, in the lone turn's path). Now they reach it as one or two.
// The text and its order are unchanged; only where it is cut differs.
type deltaPump struct {
	out func(string) error

	mu sync.Mutex
	// pending are the deltas not handed out yet, joined once as they go
	// (a lone one goes as it came, without a copy). More than fit in
	// first go on in joined, in order, all of them: a streamed reply's
	// pieces are a few bytes each, less than the string header a longer
	// pending would hold for each (and the builder's bytes hold no
	// pointer for the collector to scan).
	pending []string
	first   [8]string // pending's array
	joined  strings.Builder
	has     bool // pending or joined holds a delta, maybe an empty one
	busy    bool // a goroutine is calling out
	// idle is made by close when it must wait for a busy goroutine, which
	// closes it as it ends (it was made for every burst of pieces).
	idle chan struct{}
	err  error // the first error out returned
}

func newDeltaPump(out func(string) error) *deltaPump {
	p := &deltaPump{out: out}
	p.pending = p.first[:0]
	return p
}

// send queues text for out; it returns the error out gave an earlier
// delta, if any, so the stream stops as it did when out was called here.
func (p *deltaPump) send(text string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	switch {
	case p.joined.Len() > 0:
		p.joined.WriteString(text)
	case len(p.pending) < len(p.first):
		p.pending = append(p.pending, text)
	default:
		// Room for twice what waits, once: a burst of a fast model's
		// pieces grew the builder from a few bytes, a copy each doubling.
		n := len(text)
		for _, s := range p.pending {
			n += len(s)
		}
		p.joined.Grow(2 * n)
		for _, s := range p.pending {
			p.joined.WriteString(s)
		}
		p.joined.WriteString(text)
		clear(p.pending) // keeps no piece alive
		p.pending = p.pending[:0]
	}
	p.has = true
	if !p.busy {
		p.busy = true
		go p.deliver()
	}
	return nil
}

func (p *deltaPump) deliver() {
	p.mu.Lock()
	for p.has && p.err == nil {
		var text string
		switch {
		case p.joined.Len() > 0:
			text = p.joined.String()
			p.joined = strings.Builder{} // its bytes are text's now
		case len(p.pending) == 1:
			text = p.pending[0]
		default:
			text = strings.Join(p.pending, "")
		}
		clear(p.pending) // the slice, reused, keeps no piece alive
		p.pending = p.pending[:0]
		p.has = false
		p.mu.Unlock()
		err := p.out(text)
		p.mu.Lock()
		if err != nil && p.err == nil {
			p.err = err
		}
	}
	p.busy = false
	if p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
}

// close waits until every delta sent has been handed to out, and returns
// the first error out gave. Nothing is sent after it.
func (p *deltaPump) close() error {
	p.mu.Lock()
	var idle chan struct{}
	if p.busy {
		if p.idle == nil {
			p.idle = make(chan struct{})
		}
		idle = p.idle
	}
	p.mu.Unlock()
	if idle != nil {
		<-idle
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
