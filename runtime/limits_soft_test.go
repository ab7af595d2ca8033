package runtime

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mirror-gateway/mirror/config"
	"github.com/mirror-gateway/mirror/runtime/provider"
	"github.com/mirror-gateway/mirror/runtime/provider/builtin"
)

// When the checkpoint mark caps hard, soft comes down with it in
// proportion, and the three places that show the limits agree: the
// model details (GET /api/models), `mirror replay`, and the reading the
// turn itself takes.
func TestACappedHardKeepsSoftBelowItEverywhere(t *testing.T) {
	e, err := NewEngine([]*Model{{Name: "m", ProvName: "builtin", Provider: builtin.New(0), Remote: "gpt-4o",
		Window: 8000, MaxOutput: 200, SoftRatio: 0.20, HardRatio: 0.90}},
		map[string][]string{"default": {"m"}}, config.Roles{Chat: "default"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	info := e.Models()[0]
	sz := e.sizer(e.models["m"], e.offered(true))
	mark := sz.budget.Mark
	if mark <= 0 || mark >= 7200 {
		t.Fatalf("the test needs the mark (%d) to cap hard 7200", mark)
	}
	wantSoft := mark * 20 / 90
	if info.Hard != mark || info.Soft < wantSoft-1 || info.Soft > wantSoft || info.Soft >= info.Hard {
		t.Fatalf("models: soft %d hard %d; want hard at the mark %d and soft %d", info.Soft, info.Hard, mark, wantSoft)
	}
	// What caps hard is given too, so a preview of other shares agrees.
	if info.HardCap != mark {
		t.Fatalf("models: hard_cap %d, want the mark %d", info.HardCap, mark)
	}
	in := TurnInput{Chat: "c", Turn: 1, Chain: "default", History: []provider.Message{{Role: provider.RoleUser, Content: "hello"}}}
	var out bytes.Buffer
	if err := e.Replay(&out, in, ReplayState{}); err != nil {
		t.Fatal(err)
	}
	if line := fmt.Sprintf("soft %d: not reached; hard %d: not reached", info.Soft, info.Hard); !strings.Contains(out.String(), line) {
		t.Fatalf("replay does not say %q:\n%s", line, out.String())
	}
	j := &journal{}
	in.Host = j
	if _, err := e.Run(context.Background(), in, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(j.contexts) == 0 {
		t.Fatal("the turn took no reading")
	}
	if ci := j.contexts[0]; ci.Soft != info.Soft || ci.Hard != info.Hard {
		t.Fatalf("the turn read soft %d hard %d; the model details say %d and %d", ci.Soft, ci.Hard, info.Soft, info.Hard)
	}
}
