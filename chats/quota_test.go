package chats

import (
	"encoding/json"
	"testing"
	"time"
)

func TestQuotaWaitJSON(t *testing.T) {
	ev := NewEvent("c1", 7, time.Time{}, &QuotaWait{Turn: "t5", Quota: 250000, Usage: 231000, WaitMS: 26000})
	var got map[string]any
	if err := json.Unmarshal(ev.JSON(), &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "quota.wait" || got["seq"] != float64(7) || got["turn"] != "t5" ||
		got["quota"] != float64(250000) || got["usage"] != float64(231000) || got["wait_ms"] != float64(26000) {
		t.Fatalf("quota.wait %s", ev.JSON())
	}
	var withReq map[string]any
	if err := json.Unmarshal(ev.WithReq("r\"1"), &withReq); err != nil || withReq["req"] != "r\"1" || withReq["usage"] != float64(231000) {
		t.Fatalf("WithReq %s (%v)", ev.WithReq("r\"1"), err)
	}
	// Other events keep their own usage object and carry no quota fields.
	var fin map[string]any
	if err := json.Unmarshal(NewEvent("c1", 8, time.Time{}, &TurnFinished{}).JSON(), &fin); err != nil {
		t.Fatal(err)
	}
	if _, ok := fin["quota"]; ok {
		t.Fatalf("turn.finished %v", fin)
	}
	if _, ok := fin["wait_ms"]; ok {
		t.Fatalf("turn.finished %v", fin)
	}
}
