package provider

import "testing"

func TestQuotaViolations(t *testing.T) {
	v := func(metric, id string, limit int64, has bool) QuotaViolation {
		q := QuotaViolation{Metric: metric, ID: id, Limit: limit, HasLimit: has}
		ClassifyQuotaID(&q)
		return q
	}
	tpm := v("generativelanguage.googleapis.com/generate_content_free_tier_input_token_count", "GenerateContentInputTokensPerModelPerMinute-FreeTier", 250000, true)
	rpm := v("generativelanguage.googleapis.com/generate_content_free_tier_requests", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", 10, true)
	rpd := v("generativelanguage.googleapis.com/generate_content_free_tier_requests", "GenerateRequestsPerDayPerProjectPerModel-FreeTier", 20, true)
	zero := v("generativelanguage.googleapis.com/generate_content_free_tier_input_token_count", "", 0, true)
	unknown := v("generativelanguage.googleapis.com/generate_content_free_tier_requests", "GenerateRequestsPerMinutePerProjectPerModel-FreeTier", 0, false)

	if !tpm.Tokens || !tpm.PerMinute || tpm.PerDay || tpm.Fatal() {
		t.Errorf("tpm %+v", tpm)
	}
	if rpm.Tokens || !rpm.PerMinute || rpm.Fatal() {
		t.Errorf("rpm %+v", rpm)
	}
	if !rpd.PerDay || !rpd.Fatal() {
		t.Errorf("rpd %+v", rpd)
	}
	if !zero.Zero() || !zero.Fatal() || !zero.Tokens {
		t.Errorf("zero %+v", zero)
	}
	if unknown.Zero() || unknown.Fatal() {
		t.Errorf("an absent quotaValue is not a zero quota: %+v", unknown)
	}

	tests := []struct {
		name  string
		all   []QuotaViolation
		want  QuotaViolation
		fatal bool
		tpm   bool
	}{
		{"tokens before requests", []QuotaViolation{rpm, tpm}, tpm, false, true},
		{"daily decides", []QuotaViolation{tpm, rpd}, rpd, true, true},
		{"zero decides", []QuotaViolation{rpm, zero}, zero, true, false},
		{"first otherwise", []QuotaViolation{unknown, rpm}, unknown, false, false},
	}
	for _, tt := range tests {
		d, ok := Decisive(tt.all)
		q := &QuotaInfo{QuotaViolation: d, All: tt.all}
		_, hasTPM := q.InputTokensPerMinute()
		if !ok || d.ID != tt.want.ID || d.Limit != tt.want.Limit || q.Fatal() != tt.fatal || hasTPM != tt.tpm {
			t.Errorf("%s: decisive %+v fatal %v tpm %v", tt.name, d, q.Fatal(), hasTPM)
		}
	}
	if _, ok := Decisive(nil); ok {
		t.Error("no violations, no decisive one")
	}
	var nilq *QuotaInfo
	if nilq.Fatal() {
		t.Error("nil quota is not fatal")
	}
}
