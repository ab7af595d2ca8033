package boundary

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mirror-gateway/mirror/runtime/tools"
)

func TestRecoveryToolArguments(t *testing.T) {
	for _, c := range []struct {
		tool, args, want string
		ok               bool
	}{
		{ToolToolOutput, `{"tool_call_id":"call_7"}`, "call_7", true},
		{ToolToolOutput, `{}`, "", false},
		{ToolToolOutput, `{"tool_call_id":7}`, "", false},
		{ToolToolOutput, `{"tool_call_id":"a","x":1}`, "", false},
		{ToolGlobalSearch, `{"around_message_id":"m123"}`, "m123", true},
		{ToolGlobalSearch, `{"around_message_id":"123"}`, "", false},
		{ToolGlobalSearch, `{"around_message_id":"m1; rm"}`, "", false},
		// Exactly the ids Mirror writes (runtime/ids): no leading zero.
		{ToolGlobalSearch, `{"around_message_id":"m007"}`, "", false},
		{ToolGlobalSearch, `{"around_message_id":"m"}`, "", false},
		{ToolGlobalSearch, `{"around_message_id":"m18446744073709551615"}`, "m18446744073709551615", true},
		{ToolGlobalSearch, `{"around_message_id":"m18446744073709551616"}`, "", false},
		{ToolGlobalSearch, `[]`, "", false},
	} {
		var got string
		var err error
		if c.tool == ToolToolOutput {
			got, err = ParseToolOutput(json.RawMessage(c.args))
		} else {
			got, err = ParseGlobalSearch(json.RawMessage(c.args))
		}
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("%s %s: %q, %v", c.tool, c.args, got, err)
		}
		if err != nil && !errors.Is(err, tools.ErrInvalidArguments) {
			t.Errorf("%s %s: error %v is not an argument error", c.tool, c.args, err)
		}
	}
}

func FuzzRecoveryToolArguments(f *testing.F) {
	f.Add(`{"tool_call_id":"call_7"}`)
	f.Add(`{"around_message_id":"m123"}`)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseToolOutput(json.RawMessage(s))
		_, _ = ParseGlobalSearch(json.RawMessage(s))
	})
}
