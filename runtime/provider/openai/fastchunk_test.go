package openai

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/provider"
)

// fastChunkSeeds are chunk shapes seen on the wire and near misses the
// fast path must refuse or decode exactly like encoding/json.
var fastChunkSeeds = []struct {
	data string
	fast bool // whether the fast path must take it
}{
	{`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"piece"},"finish_reason":null}]}`, true},
	{`{"id":"c","object":"chat.completion.chunk","created":1712,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`, true},
	{`{"choices":[{"index":0,"delta":{"content":"a \"quoted\" line\nand \u00e9 \ud83d\ude00 \/ \\ tab\t"}}]}`, true},
	{`{"choices":[{"index":0,"delta":{"content":"naïve — ünïcödé 😀"}}]}`, true},
	{"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"bad \xff utf8\"}}]}", true},
	{`{"choices":[{"index":0,"delta":{"content":null},"finish_reason":"stop"}]}`, true},
	{`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, true},
	{`{"choices":[{"index":0,"delta":{"refusal":"I can't"}}]}`, true},
	{`{"choices":[]}`, true},
	{`{}`, true},
	{` { "model" : null , "choices" : [ { "index" : 1 , "delta" : { "content" : "x" } } ] } `, true},
	{`{"choices":[{"index":-0,"delta":{"content":"x"}}],"created":-1.5e+3}`, true},
	{`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":80}}`, true},
	{`{"id":"c","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":80,"total_tokens":1280,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`, true},
	{`{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_cache_hit_tokens":8,"prompt_cache_miss_tokens":1}}`, true},
	{`{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":null,"completion_tokens_details":null}}`, true},
	{`{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens_details":{}}}`, true},
	{`{"choices":[],"usage":{}}`, true},
	// Refused: the full decoder has the last word on these.
	{`{"choices":[],"usage":{"prompt_tokens":1.0}}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":null}}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":"9"}}`, false},
	{`{"choices":[],"usage":{"Prompt_Tokens":9}}`, false},
	{`{"choices":[],"usage":{"prompt_tokens":9,"prompt_tokens":10}}`, false},
	{`{"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}}`, false},
	{`{"choices":[],"usage":{"prompt_tokens_details":{"other":1}}}`, false},
	{`{"choices":[],"usage":{"completion_tokens_details":{"reasoning_tokens":"x"}}}`, false},
	{`{"choices":[],"usage":{"cost":0.01}}`, false},
	{`{"choices":[],"usage":[]}`, false},
	{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"images":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}}]}`, false},
	{`{"Choices":[{"index":0,"delta":{"content":"case"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"Content":"case"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"cont\u0065nt":"escaped key"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}`, false},
	{`{"choices":[{"index":1.0,"delta":{"content":"x"}}]}`, false},
	{`{"choices":[{"index":01,"delta":{"content":"x"}}]}`, false},
	{`{"choices":[{"index":99999999999999999999,"delta":{"content":"x"}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":7}}]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":"x"}}]}{"choices":[]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":"x"}}],}`, false},
	{`{"error":{"message":"boom"}}`, false},
	{`{"error":null,"choices":[]}`, false},
	{`{"choices":[{"index":0,"delta":{"content":"bad \x escape"}}]}`, false},
	{"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ctl \x01\"}}]}", false},
	{`{"choices":[{"index":0,"delta":{"content":"cut`, false},
	{`{"id":1,"choices":[]}`, false},
	{`{"created":"1","choices":[]}`, false},
	{`{"logprobs":null}`, false},
	{`[]`, false},
	{`null`, false},
}

// checkFastChunk fails when the fast path accepts data and decodes it
// differently from json.Unmarshal into the same struct.
func checkFastChunk(t *testing.T, data []byte) bool {
	t.Helper()
	for _, model := range []string{"", "earlier"} {
		s := stream{model: model}
		got, ok := s.fastChunk(data)
		if !ok {
			return false
		}
		var want wireChunk
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("fast path took %q, which json.Unmarshal refuses: %v", data, err)
		}
		if model != "" {
			want.Model = "" // apply reads it only while the stream has none
		}
		if len(want.Choices) == 0 && len(got.Choices) == 0 {
			want.Choices, got.Choices = nil, nil
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("fast path on %q:\n got %+v\nwant %+v", data, *got, want)
		}
	}
	return true
}

func TestFastChunkMatchesEncodingJSON(t *testing.T) {
	for _, tc := range fastChunkSeeds {
		if got := checkFastChunk(t, []byte(tc.data)); got != tc.fast {
			t.Errorf("fast path took %q: %v, want %v", tc.data, got, tc.fast)
		}
	}
}

// TestFastChunkReadsUsage: the chunk a turn ends with, as OpenAI sends it,
// gives its counts without the full decoder.
func TestFastChunkReadsUsage(t *testing.T) {
	var s stream
	ch, ok := s.fastChunk([]byte(`{"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":80,"total_tokens":1280,"prompt_tokens_details":{"cached_tokens":1024}}}`))
	if !ok {
		t.Fatal("refused")
	}
	if got := ch.Usage.usage(); got != (provider.Usage{InputTokens: 1200, OutputTokens: 80, CachedTokens: 1024}) {
		t.Fatalf("usage %+v", got)
	}
	// The next chunk's usage starts afresh.
	ch, ok = s.fastChunk([]byte(`{"choices":[],"usage":{"prompt_tokens":7}}`))
	if !ok || ch.Usage.PromptTokensDetails != nil || ch.Usage.usage() != (provider.Usage{InputTokens: 7}) {
		t.Fatalf("second usage: %v %+v", ok, ch.Usage)
	}
}

// TestFastChunkReusesScratch: a chunk's fields do not leak into the next.
func TestFastChunkReusesScratch(t *testing.T) {
	var s stream
	if _, ok := s.fastChunk([]byte(`{"model":"m","choices":[{"index":0,"delta":{"content":"a","refusal":"r"},"finish_reason":"stop"}]}`)); !ok {
		t.Fatal("refused")
	}
	ch, ok := s.fastChunk([]byte(`{"choices":[{"delta":{"role":"assistant"}}]}`))
	if !ok {
		t.Fatal("refused")
	}
	if ch.Model != "" || len(ch.Choices) != 1 || !reflect.DeepEqual(ch.Choices[0], wireChoice{}) {
		t.Fatalf("stale fields: %+v", *ch)
	}
}

func FuzzFastChunk(f *testing.F) {
	for _, tc := range fastChunkSeeds {
		f.Add([]byte(tc.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastChunk(t, data)
	})
}
