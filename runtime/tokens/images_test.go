package tokens

import "testing"

// The documented examples of each provider's image rule.
func TestImageTokensDocumentedExamples(t *testing.T) {
	cases := []struct {
		name          string
		rule          ImageRule
		width, height int
		want          int
	}{
		// platform.openai.com/docs/guides/images-vision, "Calculating costs":
		// "A 1024 x 1024 square image in detail: high mode costs 765 tokens"
		{"openai 1024x1024 high", RuleOpenAI, 1024, 1024, 765},
		// "A 2048 x 4096 image in detail: high mode costs 1105 tokens"
		{"openai 2048x4096 high", RuleOpenAI, 2048, 4096, 1105},
		// "A 4096 x 8192 image in detail: low most costs 85 tokens"
		{"openai 4096x8192 low", RuleOpenAILow, 4096, 8192, 85},
		// No upscaling: a small image is one tile.
		{"openai 300x200 high", RuleOpenAI, 300, 200, 255},
		// docs.claude.com vision, "Evaluate image size": 200x200 ≈ 54,
		// 1000x1000 ≈ 1334, 1092x1092 ≈ 1590 tokens.
		{"anthropic 200x200", RuleAnthropic, 200, 200, 54},
		{"anthropic 1000x1000", RuleAnthropic, 1000, 1000, 1334},
		{"anthropic 1092x1092", RuleAnthropic, 1092, 1092, 1590},
		// Over the limits it is scaled down first (1568x1176, then to
		// ~1.2 MP: 1264x948): never more than ~1,600.
		{"anthropic 4000x3000 downscaled", RuleAnthropic, 4000, 3000, 1598},
		// The long edge cap alone: 1568x300 stays 1568x300.
		{"anthropic 1568x300", RuleAnthropic, 1568, 300, 628},
		// ai.google.dev/gemini-api/docs/tokens: both sides <= 384 px: 258;
		// larger: 258 per 768x768 tile.
		{"gemini 384x384", RuleGemini, 384, 384, 258},
		{"gemini 600x400 one tile", RuleGemini, 600, 400, 258},
		{"gemini 1024x1024 four tiles", RuleGemini, 1024, 1024, 1032},
		{"gemini 385x100", RuleGemini, 385, 100, 258},
		{"gemini 1920x1080", RuleGemini, 1920, 1080, 1548},
		// Seed 000: 1,600 where no rule applies or the size is unknown.
		{"no rule", RuleNone, 1024, 1024, ImageDefault},
		{"unknown size openai", RuleOpenAI, 0, 0, ImageDefault},
		{"unknown size anthropic", RuleAnthropic, 640, 0, ImageDefault},
		{"unknown size openai low", RuleOpenAILow, 0, 0, 85},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ImageTokens(c.rule, c.width, c.height); got != c.want {
				t.Errorf("ImageTokens(%q, %d, %d) = %d, want %d", c.rule, c.width, c.height, got, c.want)
			}
		})
	}
}

// Every rule is monotone enough never to go below its floor and never
// above its documented cap, whatever the size.
func FuzzImageTokens(f *testing.F) {
	f.Add(1024, 1024)
	f.Add(1, 100000)
	f.Fuzz(func(t *testing.T, w, h int) {
		if w <= 0 || h <= 0 || w > 1<<20 || h > 1<<20 {
			return
		}
		if n := AnthropicImage(w, h); n < 1 || n > 1600 {
			t.Fatalf("anthropic %dx%d = %d", w, h, n)
		}
		if n := OpenAIImage(w, h, false); n < 255 {
			t.Fatalf("openai %dx%d = %d", w, h, n)
		}
		if n := GeminiImage(w, h); n < 258 || n%258 != 0 {
			t.Fatalf("gemini %dx%d = %d", w, h, n)
		}
	})
}
