package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mirror-gateway/mirror/chats"
)

// Reading the streams. Four ways, each for its reader:
//   - walk: one subject's messages between two positions, by gets, for a
//     catch-up (a chat's record, the Telegram state log);
//   - consume: everything as it is stored, by an ordered consumer, for a
//     follower;
//   - leaderLast: one subject's last message as the stream's leader has
//     it, for a decision that must see every acknowledged write (an
//     offset, an upload entry);
//   - lastMsgs: many subjects' last messages in one direct get any
//     replica answers, for the sweeper, which must work while the dead
//     node's streams elect their leaders and can afford a replica a
//     moment behind.

// getMsg is the chat's (subject's) first message at or after stream
// sequence seq, counted (Node.gets) so tests can tell a read's cost.
func (n *Node) getMsg(ctx context.Context, records jetstream.Stream, seq uint64, opt jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error) {
	n.gets.Add(1)
	return records.GetMsg(ctx, seq, opt)
}

// walk calls fn with each message of subject in stream from position
// from to end, in order. Each get asks for the subject's next message at
// or after a position (the stream's subject index finds it), so a walk
// costs what it returns, not the stream's length; each get is bounded as
// an append is (a store that does not answer is unavailable).
func (n *Node) walk(ctx context.Context, s jetstream.Stream, subject string, from, end uint64, fn func(*jetstream.RawStreamMsg) error) error {
	for seq := max(from, 1); seq <= end; {
		gctx, cancel := context.WithTimeout(ctx, appendTimeout)
		m, err := n.getMsg(gctx, s, seq, jetstream.WithGetMsgSubject(subject))
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: cluster: read %s at %d: %w", chats.ErrUnavailable, subject, seq, err)
		}
		if m.Sequence > end {
			return nil
		}
		seq = m.Sequence + 1
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

// consume reads stream's messages on subjects with an ordered consumer
// (in order, no gaps; the client recreates it after a disconnect) from
// after position after, and calls fn with each, until ctx ends (nil) or
// fn or the consumer fails (that error: the caller consumes again from
// where it got).
func (n *Node) consume(ctx context.Context, stream string, subjects []string, after uint64, fn func(m jetstream.Msg, md *jetstream.MsgMetadata) error) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverAllPolicy}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := n.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(followBatch))
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		md, err := m.Metadata()
		if err != nil {
			return err
		}
		if err := fn(m, md); err != nil {
			return err
		}
	}
}

// leaderLast reads the last message of subject in stream by the
// JetStream API's message get, which the stream's leader answers (a KV
// or object store Get may be answered by any replica, a moment behind).
// seq is 0 when the subject has none.
func (n *Node) leaderLast(ctx context.Context, stream, subject string) ([]byte, nats.Header, uint64, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": subject})
	if err != nil {
		return nil, nil, 0, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	// Short attempts: a request made while the stream's group elects its
	// leader (just after the stream is made, or a server died) goes
	// unanswered, and the next attempt is answered.
	var msg *nats.Msg
	wait := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err = n.nc.RequestWithContext(actx, "$JS.API.STREAM.MSG.GET."+stream, req)
		cancel()
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, 0, err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
	var resp struct {
		Message *struct {
			Seq  uint64 `json:"seq"`
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, nil, 0, err
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, nil, 0, nil
	case resp.Error != nil:
		return nil, nil, 0, resp.Error
	case resp.Message == nil:
		return nil, nil, 0, errors.New("an empty answer")
	}
	hdr := nats.Header{}
	if len(resp.Message.Hdrs) > 0 {
		if hdr, err = nats.DecodeHeadersMsg(resp.Message.Hdrs); err != nil {
			return nil, nil, 0, err
		}
	}
	return resp.Message.Data, hdr, resp.Message.Seq, nil
}

// directWait bounds the wait for each message of a direct get's answer.
const directWait = time.Second

// errTooMany is a direct get that matched more subjects than the server
// answers in one batch.
var errTooMany = errors.New("too many subjects for one direct get")

// lastMsgs reads the last message of every subject of stream matching
// filters, in one direct get (a batch answered by any replica, so neither
// a consumer, whose creation needs the meta leader, nor the stream's
// leader is needed; a replica may lag a little, which a sweep can afford:
// a take is decided by the leases stream's leader). fn is called with
// each. errTooMany past the server's batch (1024 subjects).
func (n *Node) lastMsgs(ctx context.Context, stream string, filters []string, fn func(*nats.Msg)) error {
	inbox := n.nc.NewInbox()
	sub, err := n.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	req, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
	}{filters})
	if err != nil {
		return err
	}
	if err := n.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return err
	}
	for {
		// Each message of the batch comes within directWait or the get
		// fails: a request handed to a server that died just then is
		// never answered, and the sweep tries again soon.
		mctx, cancel := context.WithTimeout(ctx, directWait)
		m, err := sub.NextMsgWithContext(mctx)
		cancel()
		if err != nil {
			return fmt.Errorf("cluster: direct get from %s: %w", stream, err)
		}
		switch st := m.Header.Get("Status"); st {
		case "":
			fn(m)
		case "204", "404": // the batch's end; no subject matched
			return nil
		case "413":
			return errTooMany
		case "503":
			return fmt.Errorf("cluster: direct get from %s: %w", stream, nats.ErrNoResponders)
		default:
			return fmt.Errorf("cluster: direct get from %s: %s %s", stream, st, m.Header.Get("Description"))
		}
	}
}

// live says whether a KV entry's last message is a value (not a delete,
// a purge, or the marker of an expired key).
func live(m *nats.Msg) bool {
	return m.Header.Get("KV-Operation") == "" && m.Header.Get(jetstream.MarkerReasonHeader) == ""
}
