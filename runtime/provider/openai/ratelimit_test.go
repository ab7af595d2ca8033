package openai

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// OpenAI's x-ratelimit-* headers (wire-formats.md §2.2) reach the Result
// on success and the Error on a 429.
func TestRateLimitHeaders(t *testing.T) {
	headers := map[string]string{
		"x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000",
		"x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984",
		"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
	}
	check := func(t *testing.T, rl *provider.RateLimits) {
		t.Helper()
		if rl == nil || rl.Requests == nil || rl.Tokens == nil {
			t.Fatalf("limits %+v", rl)
		}
		if rl.Requests.Limit != 60 || rl.Requests.Remaining != 59 || rl.Requests.Reset != time.Second ||
			rl.Tokens.Limit != 150000 || rl.Tokens.Remaining != 149984 || rl.Tokens.Reset != 6*time.Minute {
			t.Fatalf("requests %+v tokens %+v", *rl.Requests, *rl.Tokens)
		}
	}
	t.Run("success", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			for k, v := range headers {
				w.Header().Set(k, v)
			}
			sseHeaders(w)
			event(w, textChunk("ok"))
			event(w, finishChunk("stop"))
			event(w, "[DONE]")
		})
		res, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
		if err != nil {
			t.Fatal(err)
		}
		check(t, res.Limits)
	})
	t.Run("429", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			for k, v := range headers {
				w.Header().Set(k, v)
			}
			errorJSON(w, 429, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-xxx on tokens per min (TPM): Limit 30000, Used 29937, Requested 385. Please try again in 644ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
		})
		_, err := f.client(testKey).Stream(context.Background(), hello(), collect(new([]string)))
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Class != provider.ClassRateLimited {
			t.Fatalf("err %v", err)
		}
		check(t, pe.Limits)
	})
	t.Run("none", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			event(w, finishChunk("stop"))
			event(w, "[DONE]")
		})
		res, err := f.client("").Stream(context.Background(), hello(), collect(new([]string)))
		if err != nil || res.Limits != nil {
			t.Fatalf("err %v limits %+v", err, res.Limits)
		}
	})
}
