package config

import (
	"path"
	"sort"
)

// People are the settings of people (chats/people): what each role may do
// with tools, and how much each person may spend.
type People struct {
	// Policies overlay tools.policies per role (owner or member), by tool
	// name or pattern (such as github__*): allow, ask or deny. A tool
	// tools.policies denies stays denied for everyone.
	Policies map[string]map[string]string `yaml:"policies"`
	// TokensPerDay caps the tokens (input and output, as providers billed
	// them) each person's turns may use in a UTC day; 0: no cap. Past it a
	// message is refused with rate_limited until the day turns.
	TokensPerDay int64 `yaml:"tokens_per_day"`
}

// Roles people may have, as people.policies names them.
var peopleRoles = []string{"owner", "member"}

func (v *validator) people() {
	p := v.c.People
	roles := make([]string, 0, len(p.Policies))
	for role := range p.Policies {
		roles = append(roles, role)
	}
	sort.Strings(roles)
	for _, role := range roles {
		known := false
		for _, r := range peopleRoles {
			known = known || r == role
		}
		if !known {
			v.fail("people.policies."+role, "a role is owner or member, not %s", show(role))
			continue
		}
		tools := make([]string, 0, len(p.Policies[role]))
		for t := range p.Policies[role] {
			tools = append(tools, t)
		}
		sort.Strings(tools)
		for _, t := range tools {
			field := "people.policies." + role + "." + t
			if _, err := path.Match(t, ""); err != nil || t == "" {
				v.fail(field, "a tool name or a pattern such as github__*, not %s", show(t))
			}
			switch p.Policies[role][t] {
			case PolicyAllow, PolicyAsk, PolicyDeny:
			default:
				v.fail(field, "want allow, ask or deny, not %s", show(p.Policies[role][t]))
			}
		}
	}
	if p.TokensPerDay < 0 {
		v.fail("people.tokens_per_day", "must be 0 (no cap) or more, such as 2000000")
	}
}
