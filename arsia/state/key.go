package state

import (
	"fmt"
	"strings"

	"github.com/custos-runtime/custos/arsia"
)

// MaxKeyLength is the longest state key, in characters (ARSIA-State
// §2.1.1). Keys are ASCII, so characters and bytes coincide.
const MaxKeyLength = 512

// ReservedPrefix starts the local keys the protocol keeps for itself
// (grant records, metadata). Agents may not write them (ARSIA-State §2.2).
const ReservedPrefix = "arsiaprotocol."

// Scope is the lifecycle and visibility class of an entry (ARSIA-State §1).
type Scope string

// The four scopes.
const (
	// ScopeSession is temporary data of one request/response chain, at
	// most 24 hours, never audited and never persisted.
	ScopeSession Scope = "session"
	// ScopeAgent is an agent's private, durable memory.
	ScopeAgent Scope = "agent"
	// ScopeShared is durable data the owner shares through grants.
	ScopeShared Scope = "shared"
	// ScopeGlobal is read-only reference data managed by the platform
	// operator; agents can read it but never write it.
	ScopeGlobal Scope = "global"
)

// Scopes returns the four scopes in the order of ARSIA-State §1.
func Scopes() []Scope { return []Scope{ScopeSession, ScopeAgent, ScopeShared, ScopeGlobal} }

// Valid reports whether s is one of the four scopes.
func (s Scope) Valid() bool {
	switch s {
	case ScopeSession, ScopeAgent, ScopeShared, ScopeGlobal:
		return true
	}
	return false
}

// ParseScope returns s as a Scope, or an error wrapping ErrInvalidScope.
func ParseScope(s string) (Scope, error) {
	if sc := Scope(s); sc.Valid() {
		return sc, nil
	}
	return "", fmt.Errorf("%w: unknown scope %s; scope must be one of session, agent, shared, global", ErrInvalidScope, quote(s))
}

// Key is a parsed state key agent:<owner>/<scope>/<name>.
type Key struct {
	// Owner is the owning agent's identifier, "agent:" prefix included.
	Owner string
	// Scope is the scope segment.
	Scope Scope
	// Name is the local key; it may contain '/'.
	Name string
}

// String returns the key in wire form.
func (k Key) String() string { return k.Owner + "/" + string(k.Scope) + "/" + k.Name }

// Reserved reports whether the local key uses the reserved
// "arsiaprotocol." prefix.
func (k Key) Reserved() bool { return strings.HasPrefix(k.Name, ReservedPrefix) }

// KeyPolicy says how strictly ParseKey-like functions check a key. The
// zero KeyPolicy is what an agent-facing operation needs.
type KeyPolicy struct {
	// Owner, when set, is the agent the key must belong to: the key must
	// start with Owner + "/". It also settles which agent identifier a key
	// starts with when the identifier has a /resource part.
	Owner string
	// AllowReserved accepts local keys starting with "arsiaprotocol.";
	// only the implementation's own bookkeeping may set it.
	AllowReserved bool
}

// ParseKey parses a key under the zero KeyPolicy: any owner, no reserved
// local keys.
func ParseKey(s string) (Key, error) { return KeyPolicy{}.Parse(s) }

// Parse parses and checks s. The error wraps ErrInvalidKey and says what is
// wrong: the "length", a character outside [A-Za-z0-9:._/-], the owner, an
// unknown "scope", an empty local key or segment; a reserved local key
// wraps ErrReservedKey as well.
//
// Without Policy.Owner, the owner is the shortest prefix that is a valid
// agent identifier followed by a scope segment: agent:acme.alpha/agent/x is
// owned by agent:acme.alpha, and agent:acme.alpha/w1/agent/x by
// agent:acme.alpha/w1 (an identifier with a resource). An agent whose
// resource is itself a scope name must therefore parse its keys with
// Policy.Owner set.
func (p KeyPolicy) Parse(s string) (Key, error) {
	fail := func(format string, args ...any) (Key, error) {
		return Key{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidKey}, args...)...)
	}
	switch {
	case s == "":
		return fail("key is empty")
	case len(s) > MaxKeyLength:
		return fail("key length %d exceeds the maximum of %d characters", len(s), MaxKeyLength)
	}
	for i := 0; i < len(s); i++ {
		if !keyChar(s[i]) {
			return fail("key %s contains %q; keys allow only letters, digits and ':._/-'", quote(s), s[i])
		}
	}
	if !strings.HasPrefix(s, arsia.AgentIDPrefix) {
		return fail("key %s must start with the owner's agent identifier (agent:...)", quote(s))
	}
	var owner, rest string
	if p.Owner != "" {
		var ok bool
		if rest, ok = strings.CutPrefix(s, p.Owner+"/"); !ok {
			return fail("key %s is not in the namespace of %s", quote(s), quote(p.Owner))
		}
		owner = p.Owner
	} else {
		owner, rest = splitOwner(s)
	}
	if err := checkOwner(owner); err != nil {
		return fail("key %s: %v", quote(s), err)
	}
	scopeSeg, name, ok := strings.Cut(rest, "/")
	if !ok {
		return fail("key %s must have the form agent:<owner>/<scope>/<name>: the scope or the name is missing", quote(s))
	}
	scope, err := ParseScope(scopeSeg)
	if err != nil {
		return fail("key %s: unknown scope segment %s; scope must be one of session, agent, shared, global", quote(s), quote(scopeSeg))
	}
	if name == "" {
		return fail("key %s has an empty local key", quote(s))
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" {
			return fail("key %s has an empty segment in its local key", quote(s))
		}
	}
	k := Key{Owner: owner, Scope: scope, Name: name}
	if k.Reserved() && !p.AllowReserved {
		return Key{}, fmt.Errorf("%w: %w: local key %s uses the reserved %s prefix", ErrInvalidKey, ErrReservedKey, quote(name), quote(ReservedPrefix))
	}
	return k, nil
}

// splitOwner splits s (which starts with "agent:") into the owner and the
// rest, preferring an owner without a resource.
func splitOwner(s string) (owner, rest string) {
	first := strings.IndexByte(s, '/')
	if first < 0 {
		return s, ""
	}
	owner, rest = s[:first], s[first+1:]
	seg, after, _ := strings.Cut(rest, "/")
	if Scope(seg).Valid() {
		return owner, rest
	}
	// agent:org.name/resource/<scope>/...: the owner has a resource.
	if next, _, ok := strings.Cut(after, "/"); ok && Scope(next).Valid() {
		return s[:first+1+len(seg)], after
	}
	return owner, rest
}

func checkOwner(owner string) error {
	if _, err := arsia.ParseAgentID(owner); err != nil {
		return fmt.Errorf("owner %s is not a valid agent identifier", quote(owner))
	}
	return nil
}

func keyChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == ':' || c == '.' || c == '_' || c == '/' || c == '-'
}

// ValidateKey checks s under the zero KeyPolicy; see KeyPolicy.Parse.
func ValidateKey(s string) error {
	_, err := ParseKey(s)
	return err
}

// MaxKeyPatternLength is the longest grant key pattern: a key plus '*'.
const MaxKeyPatternLength = MaxKeyLength + 1

// KeyPattern is a grant's key_pattern (ARSIA-State §3.3.1): an exact key,
// or a prefix followed by '*' that matches every key starting with it.
type KeyPattern struct {
	// Prefix is the pattern without its trailing '*'.
	Prefix string
	// Wildcard is true when the pattern ends with '*'.
	Wildcard bool
}

// String returns the pattern in wire form.
func (p KeyPattern) String() string {
	if p.Wildcard {
		return p.Prefix + "*"
	}
	return p.Prefix
}

// Matches reports whether key is covered by the pattern. Callers must also
// check that the key's owner is the grantor: a pattern is a plain string
// prefix.
func (p KeyPattern) Matches(key string) bool {
	if p.Wildcard {
		return strings.HasPrefix(key, p.Prefix)
	}
	return key == p.Prefix
}

// ParseKeyPattern parses a grant key pattern for grantor. An exact pattern
// must be a valid key owned by grantor; a prefix pattern must start with
// grantor + "/", so that it can never reach into the namespace of an agent
// whose identifier merely starts with the grantor's (agent:acme.alpha* would
// match agent:acme.alphabet/...). Only a trailing '*' is allowed, and a
// prefix reaching into a local key may not name a reserved one. The error
// wraps ErrInvalidArgs. An empty grantor means the owner the pattern
// itself names, which checks the syntax only.
func ParseKeyPattern(pattern, grantor string) (KeyPattern, error) {
	fail := func(format string, args ...any) (KeyPattern, error) {
		return KeyPattern{}, fmt.Errorf("%w: key_pattern "+format, append([]any{ErrInvalidArgs}, args...)...)
	}
	if len(pattern) > MaxKeyPatternLength {
		return fail("length %d exceeds the maximum of %d characters", len(pattern), MaxKeyPatternLength)
	}
	prefix, wild := strings.CutSuffix(pattern, "*")
	if grantor == "" {
		grantor, _ = splitOwner(prefix)
		if !strings.HasPrefix(prefix, grantor+"/") {
			return fail("%s must start with an agent namespace agent:<owner>/", quote(pattern))
		}
	}
	if err := checkOwner(grantor); err != nil {
		return fail("%s: grantor %v", quote(pattern), err)
	}
	if strings.Contains(prefix, "*") {
		return fail("%s may use '*' only as its last character", quote(pattern))
	}
	if !wild {
		if _, err := (KeyPolicy{Owner: grantor}).Parse(prefix); err != nil {
			return fail("%s: %v", quote(pattern), err)
		}
		return KeyPattern{Prefix: prefix}, nil
	}
	for i := 0; i < len(prefix); i++ {
		if !keyChar(prefix[i]) {
			return fail("%s contains %q; keys allow only letters, digits and ':._/-'", quote(pattern), prefix[i])
		}
	}
	rest, ok := strings.CutPrefix(prefix, grantor+"/")
	if !ok {
		return fail("%s must start with the grantor's namespace %s", quote(pattern), quote(grantor+"/"))
	}
	if scopeSeg, name, full := strings.Cut(rest, "/"); full {
		if !Scope(scopeSeg).Valid() {
			return fail("%s: unknown scope segment %s", quote(pattern), quote(scopeSeg))
		}
		if strings.HasPrefix(name, ReservedPrefix) {
			return fail("%s: %v", quote(pattern), ErrReservedKey)
		}
	}
	return KeyPattern{Prefix: prefix, Wildcard: true}, nil
}
