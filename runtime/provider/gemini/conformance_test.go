package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// Real Gemini error bodies (wire-formats.md §3 and the threads it cites).
const (
	bodyTPM = `{"error":{"code":429,
 "message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
 "status":"RESOURCE_EXHAUSTED",
 "details":[
  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"250000"}]},
  {"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},
  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}`
	bodyRPMAndTPM = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[
  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[
   {"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-pro"},"quotaValue":"5"},
   {"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-pro"},"quotaValue":"125000"}]},
  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}`
	bodyPerDay = `{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.","status":"RESOURCE_EXHAUSTED","details":[
  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash"},"quotaValue":"20"}]},
  {"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},
  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"43s"}]}}`
	zeroMessage = `You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_input_token_count, limit: 0, model: gemini-2.5-pro\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 0, model: gemini-2.5-pro\nPlease retry in 20.04466179s.`
	// Zero quota with quotaValue "0" in the details.
	bodyZero = `{"error":{"code":429,"message":"` + zeroMessage + `","status":"RESOURCE_EXHAUSTED","details":[
  {"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},
  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[
   {"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-pro"},"quotaValue":"0"},
   {"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerMinutePerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-pro"},"quotaValue":"0"}]},
  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"20s"}]}}`
	// Zero quota where the details leave quotaValue out: the message says it.
	bodyZeroNoValue = `{"error":{"code":429,"message":"` + zeroMessage + `","status":"RESOURCE_EXHAUSTED","details":[
  {"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[
   {"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_input_token_count","quotaId":"GenerateContentInputTokensPerModelPerMinute-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-pro"}}]},
  {"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"20s"}]}}`
	// Zero quota with no structured details at all.
	bodyZeroTextOnly = `{"error":{"code":429,"message":"` + zeroMessage + `","status":"RESOURCE_EXHAUSTED"}}`
	bodyHelpOnly     = `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]}]}}`
	bodyBadKey       = `{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[
 {"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}},
 {"@type":"type.googleapis.com/google.rpc.LocalizedMessage","locale":"en-US","message":"API key not valid. Please pass a valid API key."}]}}`
	bodyLeaked     = `{"error":{"code":403,"message":"Your API key was reported as leaked. Please use another API key.","status":"PERMISSION_DENIED"}}`
	bodyDisabled   = `{"error":{"code":403,"message":"Generative Language API has not been used in project 123456789 before or it is disabled. Enable it by visiting https://console.developers.google.com/apis/api/generativelanguage.googleapis.com/overview?project=123456789 then retry.","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"SERVICE_DISABLED","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com","consumer":"projects/123456789"}}]}}`
	bodyBlocked    = `{"error":{"code":403,"message":"Requests to this API generativelanguage.googleapis.com method google.ai.generativelanguage.v1beta.GenerativeService.StreamGenerateContent are blocked.","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_SERVICE_BLOCKED","domain":"googleapis.com"}]}}`
	bodyBilling    = `{"error":{"code":400,"message":"User location is not supported for the API use without a billing account linked.","status":"FAILED_PRECONDITION"}}`
	bodyTooLong    = `{"error":{"code":400,"message":"The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).","status":"INVALID_ARGUMENT"}}`
	bodyBadRequest = `{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified\n","status":"INVALID_ARGUMENT"}}`
	bodyNotFound   = `{"error":{"code":404,"message":"models/gemini-9-pro is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.","status":"NOT_FOUND"}}`
	bodyInternal   = `{"error":{"code":500,"message":"An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting","status":"INTERNAL"}}`
	bodyOverloaded = `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`
	bodyDeadline   = `{"error":{"code":504,"message":"Deadline expired before operation could complete.","status":"DEADLINE_EXCEEDED"}}`
)

// quotaWant is what a conformance case expects of Error.Quota.
type quotaWant struct {
	id        string
	limit     int64
	hasLimit  bool
	perDay    bool
	perMinute bool
	tokens    bool
	retry     time.Duration
	tpm       int64 // InputTokensPerMinute().Limit, -1 for none
}

func TestErrorConformance(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header map[string]string
		body   string
		class  provider.Class
		code   string
		retry  time.Duration
		quota  *quotaWant
	}{
		{"tpm 429 learns the quota", 429, nil, bodyTPM, provider.ClassRateLimited, "RESOURCE_EXHAUSTED", 26 * time.Second,
			&quotaWant{id: "GenerateContentInputTokensPerModelPerMinute-FreeTier", limit: 250000, hasLimit: true, perMinute: true, tokens: true, retry: 26 * time.Second, tpm: 250000}},
		{"rpm and tpm: tokens decide", 429, nil, bodyRPMAndTPM, provider.ClassRateLimited, "RESOURCE_EXHAUSTED", 1500 * time.Millisecond,
			&quotaWant{id: "GenerateContentInputTokensPerModelPerMinute-FreeTier", limit: 125000, hasLimit: true, perMinute: true, tokens: true, retry: 1500 * time.Millisecond, tpm: 125000}},
		{"per day fails at once", 429, nil, bodyPerDay, provider.ClassQuota, "RESOURCE_EXHAUSTED", 0,
			&quotaWant{id: "GenerateRequestsPerDayPerProjectPerModel-FreeTier", limit: 20, hasLimit: true, perDay: true, retry: 43 * time.Second, tpm: -1}},
		{"zero quota fails at once", 429, nil, bodyZero, provider.ClassQuota, "RESOURCE_EXHAUSTED", 0,
			&quotaWant{id: "GenerateContentInputTokensPerModelPerMinute-FreeTier", limit: 0, hasLimit: true, perMinute: true, tokens: true, retry: 20 * time.Second, tpm: 0}},
		{"zero quota from the message", 429, nil, bodyZeroNoValue, provider.ClassQuota, "RESOURCE_EXHAUSTED", 0,
			&quotaWant{id: "GenerateContentInputTokensPerModelPerMinute-FreeTier", limit: 0, hasLimit: true, perMinute: true, tokens: true, retry: 20 * time.Second, tpm: 0}},
		{"zero quota, text only", 429, nil, bodyZeroTextOnly, provider.ClassQuota, "RESOURCE_EXHAUSTED", 0,
			&quotaWant{limit: 0, hasLimit: true, tokens: true, retry: 20044661790 * time.Nanosecond, tpm: -1}},
		{"429 with only Help", 429, nil, bodyHelpOnly, provider.ClassRateLimited, "RESOURCE_EXHAUSTED", 0, nil},
		{"429 Retry-After header when no RetryInfo", 429, map[string]string{"Retry-After": "9"}, bodyHelpOnly, provider.ClassRateLimited, "RESOURCE_EXHAUSTED", 9 * time.Second, nil},
		{"bad key is auth", 400, nil, bodyBadKey, provider.ClassAuth, "API_KEY_INVALID", 0, nil},
		{"leaked key is auth", 403, nil, bodyLeaked, provider.ClassAuth, "PERMISSION_DENIED", 0, nil},
		{"api disabled", 403, nil, bodyDisabled, provider.ClassPermission, "SERVICE_DISABLED", 0, nil},
		{"method blocked", 403, nil, bodyBlocked, provider.ClassPermission, "API_KEY_SERVICE_BLOCKED", 0, nil},
		{"no billing account", 400, nil, bodyBilling, provider.ClassQuota, "FAILED_PRECONDITION", 0, nil},
		{"context too long", 400, nil, bodyTooLong, provider.ClassContextLength, "INVALID_ARGUMENT", 0, nil},
		{"bad request", 400, nil, bodyBadRequest, provider.ClassBadRequest, "INVALID_ARGUMENT", 0, nil},
		{"model not found", 404, nil, bodyNotFound, provider.ClassNotFound, "NOT_FOUND", 0, nil},
		{"internal", 500, nil, bodyInternal, provider.ClassServer, "INTERNAL", 0, nil},
		{"overloaded", 503, map[string]string{"Retry-After": "4"}, bodyOverloaded, provider.ClassOverloaded, "UNAVAILABLE", 4 * time.Second, nil},
		{"deadline", 504, nil, bodyDeadline, provider.ClassServer, "DEADLINE_EXCEEDED", 0, nil},
		{"array-wrapped body", 404, nil, "[" + bodyNotFound + "]", provider.ClassNotFound, "NOT_FOUND", 0, nil},
		{"proxy html", 502, nil, "<html><body><h1>502 Bad Gateway</h1></body></html>", provider.ClassServer, "", 0, nil},
		{"empty 500", 500, nil, "", provider.ClassServer, "", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				errorJSON(w, tt.status, tt.body)
			})
			res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err %v is not a provider error", err)
			}
			if pe.Class != tt.class || pe.Status != tt.status || pe.Code != tt.code || pe.RetryAfter != tt.retry || pe.Provider != "test" {
				t.Fatalf("got class=%s status=%d code=%q retry=%s provider=%s, want %s %d %q %s",
					pe.Class, pe.Status, pe.Code, pe.RetryAfter, pe.Provider, tt.class, tt.status, tt.code, tt.retry)
			}
			want := tt.class.Group()
			if got := provider.ClassOf(err).Group(); got != want {
				t.Fatalf("group %s, want %s", got, want)
			}
			if tt.class == provider.ClassQuota && pe.Class.Retryable() {
				t.Fatal("a quota refusal must fail at once")
			}
			if pe.Message == "" || strings.Contains(err.Error(), testKey) {
				t.Fatalf("message %q / error %q", pe.Message, err)
			}
			if res.Text != "" || res.ToolCalls != nil {
				t.Fatalf("result %+v on error", res)
			}
			checkQuota(t, pe.Quota, tt.quota)
		})
	}
}

func checkQuota(t *testing.T, got *provider.QuotaInfo, want *quotaWant) {
	t.Helper()
	if want == nil {
		if got != nil && len(got.All) > 0 {
			t.Fatalf("unexpected quota %+v", got)
		}
		return
	}
	if got == nil {
		t.Fatal("no quota info")
	}
	if got.ID != want.id || got.Limit != want.limit || got.HasLimit != want.hasLimit || got.PerDay != want.perDay ||
		got.PerMinute != want.perMinute || got.Tokens != want.tokens || got.RetryAfter != want.retry {
		t.Fatalf("quota %+v, want %+v", *got, *want)
	}
	if v, ok := got.InputTokensPerMinute(); (want.tpm >= 0) != ok || ok && v.Limit != want.tpm {
		t.Fatalf("input tokens per minute %+v %v, want %d", v, ok, want.tpm)
	}
	if got.Metric == "" || len(got.All) == 0 {
		t.Fatalf("quota without metric or violations: %+v", got)
	}
}

// The same classification holds for an error Gemini sends inside a 200
// stream: the body's own code stands in for the status.
func TestStreamErrorConformance(t *testing.T) {
	for _, tt := range []struct {
		body  string
		class provider.Class
	}{
		{bodyTPM, provider.ClassRateLimited},
		{bodyPerDay, provider.ClassQuota},
		{bodyInternal, provider.ClassServer},
		{bodyOverloaded, provider.ClassOverloaded},
		{bodyBadKey, provider.ClassAuth},
	} {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			chunk(w, textChunk1)
			chunk(w, strings.ReplaceAll(tt.body, "\n", ""))
		})
		res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
		if provider.ClassOf(err) != tt.class || res.Text != "Let me" {
			t.Errorf("%s: err %v text %q, want %s", tt.class, err, res.Text, tt.class)
		}
	}
}

// TestKeyNeverInError checks every path an error takes: an echo of the
// exact key in a status error and in a stream, and a transport error.
func TestKeyNeverInError(t *testing.T) {
	bodies := []string{
		`{"error":{"code":403,"message":"Permission denied: Consumer 'api_key:` + testKey + `' has been suspended.","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"CONSUMER_SUSPENDED","domain":"googleapis.com","metadata":{"consumer":"projects/1"}}]}}`,
		`{"error":{"code":400,"message":"API key not valid: AIzaSyAnotherKeyThatIsNotOurs0000000. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`,
		`{"error":{"code":400,"message":"bad ?key=` + testKey + `","status":"` + testKey + `"}}`,
		`<html>bad key ` + testKey + `</html>`,
	}
	check := func(t *testing.T, err error) {
		t.Helper()
		if err == nil {
			t.Fatal("no error")
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			for _, s := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
				if strings.Contains(s, testKey) || strings.Contains(s, "0123456789abcdef") || strings.Contains(s, "AIzaSyAnother") {
					t.Fatalf("key leaked: %s", s)
				}
			}
		}
		var pe *provider.Error
		if !errors.As(err, &pe) || strings.Contains(pe.Message, testKey) || strings.Contains(pe.Code, testKey) {
			t.Fatalf("err %#v", err)
		}
	}
	for i, body := range bodies {
		t.Run(fmt.Sprint("status/", i), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) { errorJSON(w, 403, body) })
			_, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			check(t, err)
		})
		t.Run(fmt.Sprint("stream/", i), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) { sseHeaders(w); chunk(w, body) })
			_, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
			check(t, err)
		})
	}
	t.Run("transport", func(t *testing.T) {
		c := New(Config{Name: "dead", BaseURL: "http://127.0.0.1:1/" + testKey, APIKey: testKey})
		_, err := c.Stream(context.Background(), hello(), collect(new([]string)))
		check(t, err)
		if provider.ClassOf(err) != provider.ClassNetwork {
			t.Fatalf("class %s", provider.ClassOf(err))
		}
	})
}

var fixedNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
