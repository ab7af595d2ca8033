package provider

import (
	"errors"
	"testing"
)

func TestGroups(t *testing.T) {
	want := map[Class]Group{
		ClassAuth: GroupCaller, ClassPermission: GroupCaller, ClassNotFound: GroupCaller,
		ClassBadRequest: GroupCaller, ClassContextLength: GroupCaller,
		ClassQuota: GroupPolicy, ClassRateLimited: GroupPolicy,
		ClassOverloaded: GroupProvider, ClassServer: GroupProvider,
		ClassNetwork: GroupGateway,
	}
	if len(Classes()) != len(want) {
		t.Fatalf("Classes() has %d classes, the table %d: keep them in step", len(Classes()), len(want))
	}
	for _, c := range Classes() {
		g, ok := want[c]
		if !ok {
			t.Fatalf("class %s has no expected group", c)
		}
		if c.Group() != g {
			t.Errorf("%s.Group() = %s, want %s", c, c.Group(), g)
		}
	}
	// What we cannot name is ours.
	if got := ClassOf(errors.New("boom")).Group(); got != GroupGateway {
		t.Errorf("a non-provider error is in group %s", got)
	}
	if got := Class("new_kind").Group(); got != GroupGateway {
		t.Errorf("an unknown class is in group %s", got)
	}
}

// The policy group mixes both answers on purpose: a rate limit passes with
// time, a quota does not. Every caller class is final.
func TestRetryableByGroup(t *testing.T) {
	for _, c := range Classes() {
		switch c.Group() {
		case GroupCaller:
			if c.Retryable() {
				t.Errorf("caller class %s is retryable", c)
			}
		case GroupProvider, GroupGateway:
			if !c.Retryable() {
				t.Errorf("%s class %s is not retryable", c.Group(), c)
			}
		}
	}
	if ClassQuota.Retryable() || !ClassRateLimited.Retryable() {
		t.Error("quota must fail at once, rate_limited must wait and retry")
	}
}
