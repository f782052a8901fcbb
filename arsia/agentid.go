package arsia

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// AgentIDPrefix starts every agent identifier.
const AgentIDPrefix = "agent:"

// MaxAgentIDLength is the longest agent identifier, in characters.
const MaxAgentIDLength = 256

// AgentID is a parsed agent identifier (Core §3):
//
//	agent:<org>.<name>[.<sub>...][/<resource>]
//
// Segments are ASCII letters, digits and inner hyphens; the resource also
// allows underscores. Identifiers are case-sensitive and never normalised.
type AgentID struct {
	Org  string
	Name string
	// Sub holds the segments after Name; it is empty, never nil, after a
	// successful parse.
	Sub []string
	// Resource is the part after '/', or "" when there is none.
	Resource string
}

// String returns the identifier in wire form.
func (a AgentID) String() string {
	var b strings.Builder
	b.WriteString(AgentIDPrefix)
	b.WriteString(a.Org)
	b.WriteByte('.')
	b.WriteString(a.Name)
	for _, s := range a.Sub {
		b.WriteByte('.')
		b.WriteString(s)
	}
	if a.Resource != "" {
		b.WriteByte('/')
		b.WriteString(a.Resource)
	}
	return b.String()
}

// Equal reports whether a and b are the same identifier (exact,
// case-sensitive comparison of every part).
func (a AgentID) Equal(b AgentID) bool { return a.String() == b.String() }

// ParseAgentID parses s. The error wraps ErrInvalidAgentID and says what is
// wrong: a missing "prefix", a single "segment", a leading or trailing
// "hyphen", a bad character, an empty resource or the length.
func ParseAgentID(s string) (AgentID, error) {
	id, problem := parseAgentID(s)
	if problem != "" {
		return AgentID{}, fmt.Errorf("%w: %s", ErrInvalidAgentID, problem)
	}
	return id, nil
}

// ValidAgentID reports whether s is a well-formed agent identifier.
func ValidAgentID(s string) bool {
	_, problem := parseAgentID(s)
	return problem == ""
}

// SameAgent reports whether a and b name the same agent: both must be valid
// and byte-for-byte equal (Core §3.3 rule 4: no case folding, no
// normalisation). Invalid identifiers never compare equal, not even to
// themselves.
func SameAgent(a, b string) bool {
	return a == b && ValidAgentID(a)
}

// parseAgentID returns the parsed identifier or, when s is invalid, a
// description of the first problem found.
func parseAgentID(s string) (AgentID, string) {
	quoted := pyRepr(truncateForMessage(s))
	switch {
	case s == "":
		return AgentID{}, "agent identifier is empty"
	case utf8.RuneCountInString(s) > MaxAgentIDLength:
		return AgentID{}, fmt.Sprintf("agent identifier is %d characters long, more than %d", utf8.RuneCountInString(s), MaxAgentIDLength)
	case !strings.HasPrefix(s, AgentIDPrefix):
		return AgentID{}, quoted + " must start with the 'agent:' prefix"
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return AgentID{}, quoted + " contains a non-ASCII character"
		}
	}
	body := s[len(AgentIDPrefix):]
	path, resource, hasResource := strings.Cut(body, "/")
	segments := strings.Split(path, ".")
	if len(segments) < 2 {
		return AgentID{}, quoted + " needs at least two dot-separated segments (org.name)"
	}
	for _, seg := range segments {
		if p := segmentProblem(seg); p != "" {
			return AgentID{}, quoted + ": " + p
		}
	}
	if hasResource {
		if p := resourceProblem(resource); p != "" {
			return AgentID{}, quoted + ": " + p
		}
	}
	id := AgentID{Org: segments[0], Name: segments[1], Sub: append([]string{}, segments[2:]...), Resource: resource}
	return id, ""
}

func segmentProblem(seg string) string {
	switch {
	case seg == "":
		return "empty segment between dots"
	case seg[0] == '-':
		return fmt.Sprintf("segment %s starts with a hyphen", pyRepr(seg))
	case seg[len(seg)-1] == '-':
		return fmt.Sprintf("segment %s ends with a hyphen", pyRepr(seg))
	}
	for i := 0; i < len(seg); i++ {
		if c := seg[i]; !isAlnum(c) && c != '-' {
			return fmt.Sprintf("segment %s contains %s; segments allow only letters, digits and inner hyphens", pyRepr(seg), pyRepr(string(c)))
		}
	}
	return ""
}

func resourceProblem(res string) string {
	if res == "" {
		return "empty resource after '/'"
	}
	if !isAlnum(res[0]) {
		return fmt.Sprintf("resource %s must start with a letter or digit", pyRepr(res))
	}
	for i := 0; i < len(res); i++ {
		if c := res[i]; !isAlnum(c) && c != '-' && c != '_' {
			return fmt.Sprintf("resource %s contains %s; resources allow only letters, digits, '-' and '_'", pyRepr(res), pyRepr(string(c)))
		}
	}
	return ""
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}
