package cluster

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWorkspaceShared: nodes given the same workspace dir see each
// other's markers and allow the tools; a node given a dir of its own is
// told, with a message naming the nodes it does not see, and so are the
// others once its marker is published.
func TestWorkspaceShared(t *testing.T) {
	tc := newCluster(t, 3)
	shared, own := t.TempDir(), t.TempDir()
	tests := []struct {
		name string
		dirs []string
		ok   []bool
	}{
		{"same dir", []string{shared, shared, shared}, []bool{true, true, true}},
		{"one node elsewhere", []string{shared, shared, own}, []bool{false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var mu sync.Mutex
			last := make([]error, 3)
			seen := make([]bool, 3)
			for i, nd := range tc.nodes {
				err := nd.WatchWorkspace(c, tt.dirs[i], func(err error) {
					mu.Lock()
					last[i], seen[i] = err, true
					mu.Unlock()
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 20*testTTL, "every node's check matches", func() bool {
				mu.Lock()
				defer mu.Unlock()
				for i := range last {
					if !seen[i] || (last[i] == nil) != tt.ok[i] {
						return false
					}
				}
				return true
			})
			mu.Lock()
			defer mu.Unlock()
			for i, err := range last {
				if err == nil {
					continue
				}
				if !errors.Is(err, ErrWorkspaceNotShared) || !strings.Contains(err.Error(), "does not see node(s)") {
					t.Fatalf("node %d: %v", i, err)
				}
			}
			if err := last[2]; err != nil && !strings.Contains(err.Error(), "n1, n2") {
				t.Fatalf("the odd node's message does not name the others: %v", err)
			}
		})
	}
}
