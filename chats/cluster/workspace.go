package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The shared-workspace check: each node writes a random token into a file
// of its own under WorkspaceMarkerDir in the workspace, then publishes
// the same token under "ws.<node>" in WorkspaceBucket. A node sees the
// workspace shared when, for every other live node's key, the file of that
// node in its own workspace holds the same token. The file is written
// before the key, so a node that reads the key of a node sharing its
// workspace always finds the file.
const (
	WorkspaceBucket    = "mirror_workspace"
	WorkspaceMarkerDir = ".mirror-cluster"
	wsPrefix           = "ws."
)

// ErrWorkspaceNotShared is what CheckWorkspace reports when another node
// does not see the same workspace.
var ErrWorkspaceNotShared = errors.New("the workspace is not shared by every node of the cluster")

// WatchWorkspace writes this node's marker into dir and checks, now and
// whenever a node publishes its marker, that every live node's marker is
// in dir too. onCheck gets nil when the workspace is shared and an error
// naming the nodes that do not share it otherwise; it is called once
// before WatchWorkspace returns, then on every change until ctx is done.
func (n *Node) WatchWorkspace(ctx context.Context, dir string, onCheck func(error)) error {
	kv, err := n.workspaceBucket(ctx)
	if err != nil {
		return err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	mdir := filepath.Join(dir, WorkspaceMarkerDir)
	if err := os.MkdirAll(mdir, 0o700); err != nil {
		return fmt.Errorf("cluster: workspace marker: %w", err)
	}
	name := hex.EncodeToString([]byte(n.o.Name))
	tmp := filepath.Join(mdir, name+".tmp")
	if err := os.WriteFile(tmp, []byte(token), 0o600); err != nil {
		return fmt.Errorf("cluster: workspace marker: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(mdir, name)); err != nil {
		return fmt.Errorf("cluster: workspace marker: %w", err)
	}
	if _, err := kv.Put(ctx, wsPrefix+name, []byte(token)); err != nil {
		return fmt.Errorf("cluster: publish the workspace marker: %w", err)
	}
	onCheck(n.checkWorkspace(ctx, kv, mdir))
	w, err := kv.Watch(ctx, wsPrefix+">", jetstream.UpdatesOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	go func() {
		defer w.Stop()
		// Also now and then: a node that does not share the workspace
		// stops counting once its heartbeat runs out, without an update.
		t := time.NewTicker(max(5*n.o.LeaseTTL, 5*time.Second))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := n.checkWorkspace(cctx, kv, mdir)
			cancel()
			if ctx.Err() == nil {
				onCheck(err)
			}
		}
	}()
	return nil
}

func (n *Node) workspaceBucket(ctx context.Context) (jetstream.KeyValue, error) {
	if err := n.WaitReady(ctx); err != nil {
		return nil, err
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		kv, err := n.js.CreateOrUpdateKeyValue(cctx, jetstream.KeyValueConfig{Bucket: WorkspaceBucket,
			Description: "Mirror nodes' workspace markers", History: 1, Storage: jetstream.FileStorage, Replicas: n.o.Replicas})
		cancel()
		if err == nil {
			return kv, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: workspace bucket: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkWorkspace compares every live node's published token with its file
// in mdir.
func (n *Node) checkWorkspace(ctx context.Context, kv jetstream.KeyValue, mdir string) error {
	_, _, nodes, err := n.buckets()
	if err != nil {
		return err
	}
	live := map[string]bool{n.o.Name: true}
	if err := watchAll(ctx, nodes, nil, func(e jetstream.KeyValueEntry) { live[e.Key()] = true }); err != nil {
		return err
	}
	var missing []string
	err = watchAll(ctx, kv, nil, func(e jetstream.KeyValueEntry) {
		hexName := strings.TrimPrefix(e.Key(), wsPrefix)
		raw, err := hex.DecodeString(hexName)
		if err != nil || !live[string(raw)] || string(raw) == n.o.Name {
			return
		}
		got, err := os.ReadFile(filepath.Join(mdir, hexName))
		if err != nil || string(got) != string(e.Value()) {
			missing = append(missing, string(raw))
		}
	})
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%w: node %s does not see node(s) %s's marker in %s (put the workspace on storage every node mounts at the same path)",
			ErrWorkspaceNotShared, n.o.Name, strings.Join(missing, ", "), filepath.Dir(mdir))
	}
	return nil
}
