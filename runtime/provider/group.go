package provider

// Group is the coarse owner of a failure: who has to act for the same
// request to succeed. The groups and the classes in them are a closed
// vocabulary; every adapter maps every failure into one class, and the
// conformance tests of each adapter pin the mapping of real error bodies.
type Group string

// The groups a class belongs to.
const (
	// GroupCaller: the request or its credentials are wrong (auth,
	// permission, not_found, bad_request, context_length). Retrying the
	// same request never helps; someone must change the request or config.
	GroupCaller Group = "caller"
	// GroupPolicy: the provider refuses by policy (quota, rate_limited).
	// A rate limit passes with time; a quota needs billing or a new day.
	GroupPolicy Group = "policy"
	// GroupProvider: the provider failed (overloaded, server). Another try,
	// later or on another model of the chain, may succeed.
	GroupProvider Group = "provider"
	// GroupGateway: our side or the path to the provider failed (network,
	// and any error that is not a provider error at all).
	GroupGateway Group = "gateway"
)

// Classes lists every class, in a stable order, for tables and tests.
func Classes() []Class {
	return []Class{
		ClassAuth, ClassPermission, ClassNotFound, ClassBadRequest, ClassContextLength,
		ClassQuota, ClassRateLimited,
		ClassOverloaded, ClassServer,
		ClassNetwork,
	}
}

// Group returns the group of c. Unknown classes, and the empty class of an
// error that is not a provider error, belong to the gateway: if we cannot
// name the failure it is ours to fix.
func (c Class) Group() Group {
	switch c {
	case ClassAuth, ClassPermission, ClassNotFound, ClassBadRequest, ClassContextLength:
		return GroupCaller
	case ClassQuota, ClassRateLimited:
		return GroupPolicy
	case ClassOverloaded, ClassServer:
		return GroupProvider
	}
	return GroupGateway
}
