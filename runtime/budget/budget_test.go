package budget

import (
	"reflect"
	"testing"
)

func TestReserve(t *testing.T) {
	for _, c := range []struct{ window, want int }{
		{10000, 2000},     // 20 %
		{81920, 16384},    // 20 % reaches the cap
		{128000, 16384},   // capped
		{163840, 16384},   // 10 % reaches the cap
		{200000, 20000},   // 10 %
		{1000000, 100000}, // 10 %
		{0, 0},
	} {
		if got := Reserve(c.window); got != c.want {
			t.Errorf("Reserve(%d) = %d, want %d", c.window, got, c.want)
		}
	}
}

func TestWindowFor(t *testing.T) {
	for limit := 1; limit < 400000; limit += 997 {
		w := windowFor(limit)
		if ceilingOf(w) < limit || ceilingOf(w-1) >= limit {
			t.Fatalf("windowFor(%d) = %d: ceiling %d, one less %d", limit, w, ceilingOf(w), ceilingOf(w-1))
		}
	}
}

func TestNew(t *testing.T) {
	for _, c := range []struct {
		name   string
		window int
		limit  string
		depth  int
		want   Budget
	}{
		{"unknown window", 0, "auto", 0, Budget{Window: 128000, Limit: "auto", PolicyWindow: 128000, Reserve: 16384, Ceiling: 111616, Mark: 94873, Warn: 80363, TailTokens: 16742}},
		{"1M auto", 1000000, "auto", 0, Budget{Window: 1000000, Limit: "auto", PolicyWindow: 302222, Reserve: 30222, Ceiling: 272000, Mark: 231200, Warn: 195840, TailTokens: 40800}},
		{"1M 200k", 1000000, "200k", 0, Budget{Window: 1000000, Limit: "200k", PolicyWindow: 222222, Reserve: 22222, Ceiling: 200000, Mark: 170000, Warn: 144000, TailTokens: 30000}},
		{"1M 128k", 1000000, "128k", 0, Budget{Window: 1000000, Limit: "128k", PolicyWindow: 144384, Reserve: 16384, Ceiling: 128000, Mark: 108800, Warn: 92160, TailTokens: 19200}},
		{"1M full", 1000000, "full", 0, Budget{Window: 1000000, Limit: "full", PolicyWindow: 1000000, Reserve: 100000, Ceiling: 900000, Mark: 765000, Warn: 648000, TailTokens: 65536}},
		{"step from a larger model", 1000000, "10M", 0, Budget{Window: 1000000, Limit: "full", PolicyWindow: 1000000, Reserve: 100000, Ceiling: 900000, Mark: 765000, Warn: 648000, TailTokens: 65536}},
		{"step above full", 200000, "400k", 0, Budget{Window: 200000, Limit: "full", PolicyWindow: 200000, Reserve: 20000, Ceiling: 180000, Mark: 153000, Warn: 129600, TailTokens: 27000}},
		{"auto is full on 200k", 200000, "auto", 0, Budget{Window: 200000, Limit: "auto", PolicyWindow: 200000, Reserve: 20000, Ceiling: 180000, Mark: 153000, Warn: 129600, TailTokens: 27000}},
		{"child", 1000000, "auto", 1, Budget{Window: 1000000, Limit: "auto", Depth: 1, PolicyWindow: 128000, Reserve: 16384, Ceiling: 111616, Mark: 94873, Warn: 80363, TailTokens: 16742}},
		{"grandchild", 1000000, "full", 2, Budget{Window: 1000000, Limit: "full", Depth: 2, PolicyWindow: 64000, Reserve: 12800, Ceiling: 51200, Mark: 43520, Warn: 36864, TailTokens: 16384}},
		{"deep", 1000000, "full", 7, Budget{Window: 1000000, Limit: "full", Depth: 7, PolicyWindow: 64000, Reserve: 12800, Ceiling: 51200, Mark: 43520, Warn: 36864, TailTokens: 16384}},
		{"small window", 50000, "auto", 0, Budget{Window: 50000, Limit: "auto", PolicyWindow: 50000, Reserve: 10000, Ceiling: 40000, Mark: 34000, Warn: 28800, TailTokens: 16384}},
		{"plain count", 1000000, "300000", 0, Budget{Window: 1000000, Limit: "300000", PolicyWindow: 333333, Reserve: 33333, Ceiling: 300000, Mark: 255000, Warn: 216000, TailTokens: 45000}},
		{"empty is auto", 0, "", 0, Budget{Window: 128000, Limit: "auto", PolicyWindow: 128000, Reserve: 16384, Ceiling: 111616, Mark: 94873, Warn: 80363, TailTokens: 16742}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := New(c.window, c.limit, c.depth)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("New(%d, %q, %d)\n got %+v\nwant %+v", c.window, c.limit, c.depth, got, c.want)
			}
		})
	}
}

func TestNewBadLimit(t *testing.T) {
	for _, s := range []string{"abc", "-5k", "0", "1.5M", "auto "} {
		if _, err := New(1000000, s, 0); err == nil {
			t.Errorf("New(%q) accepted", s)
		}
	}
}

func TestTarget(t *testing.T) {
	b, _ := New(1000000, "auto", 0) // ceiling 272000
	for _, c := range []struct{ overhead, want int }{
		{0, 81600},     // 30 %
		{10000, 71600}, // 30 % minus overhead
		{40000, 58000}, // a quarter of 232000 is more
		{300000, 0},    // nothing left
	} {
		if got := b.Target(c.overhead); got != c.want {
			t.Errorf("Target(%d) = %d, want %d", c.overhead, got, c.want)
		}
	}
	if got := b.CardBudget(0); got != 9792 {
		t.Errorf("CardBudget = %d", got)
	}
}

func TestLimitChoices(t *testing.T) {
	for _, c := range []struct {
		window int
		want   []Choice
	}{
		{0, nil},
		{200000, nil},
		{302222, nil}, // Auto is the whole window
		{400000, []Choice{{"auto", 272000}, {"128k", 128000}, {"200k", 200000}, {"full", 360000}}},
		{1000000, []Choice{{"auto", 272000}, {"128k", 128000}, {"200k", 200000}, {"400k", 400000}, {"600k", 600000}, {"full", 900000}}},
		{2000000, []Choice{{"auto", 272000}, {"128k", 128000}, {"200k", 200000}, {"400k", 400000}, {"600k", 600000}, {"1M", 1000000}, {"full", 1800000}}},
	} {
		if got := LimitChoices(c.window); !reflect.DeepEqual(got, c.want) {
			t.Errorf("LimitChoices(%d) = %v, want %v", c.window, got, c.want)
		}
	}
	// Every offered step reads back as itself.
	for _, ch := range LimitChoices(20000000) {
		b, err := New(20000000, ch.Limit, 0)
		if err != nil || b.Ceiling != ch.Ceiling {
			t.Errorf("%s: ceiling %d, err %v; offered %d", ch.Limit, b.Ceiling, err, ch.Ceiling)
		}
	}
}
