package tokens

import "math"

// ImageRule names how a provider bills an image part. The rules live here,
// in one place, so request sizing and the fakes' bills cannot drift apart
// per adapter.
type ImageRule string

// The rules Mirror knows.
const (
	RuleNone      ImageRule = ""           // no documented rule: ImageDefault
	RuleOpenAI    ImageRule = "openai"     // tiles of 512 px, detail high
	RuleOpenAILow ImageRule = "openai-low" // detail low: a flat base
	RuleAnthropic ImageRule = "anthropic"  // area / 750 after downscaling
	RuleGemini    ImageRule = "gemini"     // 258 per image or per 768-px tile
)

// ImageDefault is seed 000's flat allowance for an image (or any media
// part) where no rule applies or its pixel size is unknown, until the
// model's calibration has learned the real cost.
const ImageDefault = 1600

// ImageTokens is the input tokens of one image of width × height pixels
// under rule; ImageDefault when the rule is none or the size unknown.
func ImageTokens(rule ImageRule, width, height int) int {
	if width <= 0 || height <= 0 {
		if rule == RuleOpenAILow {
			return openAIBase
		}
		return ImageDefault
	}
	switch rule {
	case RuleOpenAI:
		return OpenAIImage(width, height, false)
	case RuleOpenAILow:
		return OpenAIImage(width, height, true)
	case RuleAnthropic:
		return AnthropicImage(width, height)
	case RuleGemini:
		return GeminiImage(width, height)
	}
	return ImageDefault
}

// OpenAI's tile rule (platform.openai.com/docs/guides/images-vision,
// "Calculating costs", GPT-4o / GPT-4.1 / o-series): detail low costs the
// base alone; detail high first scales the image to fit a 2048 × 2048
// square, then so that its shortest side is 768 px, and costs the base
// plus a fixed amount for each 512-px tile it covers. Scaling only ever
// shrinks. Mirror sends images without a detail, which is "auto"; it is
// sized as high, the dearer, so the estimate stays on the safe side.
const (
	openAIBase    = 85
	openAIPerTile = 170
)

// OpenAIImage is OpenAI's cost of a width × height image.
func OpenAIImage(width, height int, low bool) int {
	if low {
		return openAIBase
	}
	w, h := float64(width), float64(height)
	if m := math.Max(w, h); m > 2048 {
		w, h = w*2048/m, h*2048/m
	}
	if s := math.Min(w, h); s > 768 {
		w, h = w*768/s, h*768/s
	}
	tiles := math.Ceil(math.Max(1, math.Floor(w))/512) * math.Ceil(math.Max(1, math.Floor(h))/512)
	return openAIBase + openAIPerTile*int(tiles)
}

// Anthropic's area rule (docs.claude.com/en/docs/build-with-claude/vision,
// "Evaluate image size"): tokens = width × height / 750, after an image
// whose long edge exceeds 1568 px or whose cost exceeds about 1,600 tokens
// (~1.15 megapixels) is scaled down, keeping its aspect ratio, to fit both.
const (
	anthropicMaxEdge = 1568
	anthropicMaxArea = 1_200_000 // 1,600 tokens × 750: 1092 × 1092 fits, as the docs' table says
	anthropicPerArea = 750
)

// AnthropicImage is Anthropic's cost of a width × height image.
func AnthropicImage(width, height int) int {
	w, h := float64(width), float64(height)
	if m := math.Max(w, h); m > anthropicMaxEdge {
		w, h = w*anthropicMaxEdge/m, h*anthropicMaxEdge/m
	}
	if a := w * h; a > anthropicMaxArea {
		s := math.Sqrt(anthropicMaxArea / a)
		w, h = w*s, h*s
	}
	// A side scaled below one pixel is still one pixel.
	return int(math.Ceil(math.Max(1, math.Floor(w)) * math.Max(1, math.Floor(h)) / anthropicPerArea))
}

// Gemini's per-image rule (ai.google.dev/gemini-api/docs/tokens, "Image
// tokens", Gemini 2.x): an image with both sides at most 384 px costs 258
// tokens; a larger one is cropped and scaled into 768 × 768 tiles of 258
// tokens each. Newer models bill a fixed figure per media resolution;
// calibration corrects for that.
const (
	geminiPerTile   = 258
	geminiSmallSide = 384
	geminiTile      = 768
)

// GeminiImage is Gemini's cost of a width × height image.
func GeminiImage(width, height int) int {
	if width <= geminiSmallSide && height <= geminiSmallSide {
		return geminiPerTile
	}
	tw := (width + geminiTile - 1) / geminiTile
	th := (height + geminiTile - 1) / geminiTile
	return tw * th * geminiPerTile
}
