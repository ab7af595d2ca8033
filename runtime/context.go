package runtime

// ContextInfo is how full a chat's conversation is, as a turn starts: the
// numbers of the Context line the assistant reads, and of the request
// budget the browser's usage ring draws.
type ContextInfo struct {
	Used        int  `json:"used"`   // the conversation's tokens, without the fixed prompt and tools
	Window      int  `json:"window"` // the model's context window
	Soft        int  `json:"soft"`
	Hard        int  `json:"hard"`
	SoftReached bool `json:"soft_reached"`
	HardReached bool `json:"hard_reached"`
	// Request is the whole request's size against Ceiling; NextCheckpoint
	// is the size at which the view is re-planned.
	Request        int    `json:"request,omitempty"`
	Ceiling        int    `json:"ceiling,omitempty"`
	NextCheckpoint int    `json:"next_checkpoint,omitempty"`
	Model          string `json:"model,omitempty"`
	// Line is the Context line exactly as the assistant read it.
	Line string `json:"line,omitempty"`
}
