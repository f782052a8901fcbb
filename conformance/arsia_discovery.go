package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/custos-runtime/custos/arsia"
)

// execDiscovery runs the discovery suite: the /.well-known/arsia document
// (build_discovery_document), the JWKS wrapper (build_jwks) and the
// capability listing (build_capability_listing).
func execDiscovery(_ *arsiaEnv, c *arsiaCase) error {
	switch op := c.operation(""); op {
	case "build_discovery_document":
		args, ok := c.Input["args"].(map[string]any)
		if !ok {
			return fmt.Errorf("%w: input.args is not an object", errUnsupported)
		}
		var m arsia.AgentMetadata
		if err := decodeArgs(args, &m); err != nil {
			return err
		}
		built, err := arsia.NewAgentMetadata(m)
		if err != nil {
			return fmt.Errorf("build_discovery_document: %w", err)
		}
		return checkDocument(c, built.Map())
	case "build_jwks":
		entries, ok := c.Input["keys"].([]any)
		if !ok {
			return fmt.Errorf("%w: input.keys is not a list", errUnsupported)
		}
		// The suite's x values are placeholders, not keys (some are not
		// even decodable base64url), so the entries are checked for
		// structure only (arsia.JWKFromMap) and wrapped as they are;
		// arsia.NewJWKS, which also checks key material, is for real keys.
		var set arsia.JWKS
		for i, e := range entries {
			m, ok := e.(map[string]any)
			if !ok {
				return fmt.Errorf("keys[%d] is not an object", i)
			}
			k, err := arsia.JWKFromMap(m)
			if err != nil {
				return fmt.Errorf("keys[%d]: %w", i, err)
			}
			set.Keys = append(set.Keys, k)
		}
		jwks := set.Map()
		return firstErr(expectEqual(c, "jwks", jwks), expectEqual(c, "count", len(set.Keys)))
	case "build_capability_listing":
		actions, ok := c.Input["actions"].([]any)
		if !ok {
			return fmt.Errorf("%w: input.actions is not a list", errUnsupported)
		}
		var page arsia.Page
		for key, dst := range map[string]*int{"total": &page.Total, "limit": &page.Limit, "offset": &page.Offset} {
			if v, present := c.Input[key]; present {
				n, ok := v.(int)
				if !ok {
					return fmt.Errorf("%w: input.%s is not an integer", errUnsupported, key)
				}
				*dst = n
			}
		}
		listing, err := arsia.NewCapabilityListing(actions, page)
		if err != nil {
			return fmt.Errorf("build_capability_listing: %w", err)
		}
		got := map[string]any{"actions": listing.Actions, "total": listing.Total, "limit": listing.Limit, "offset": listing.Offset}
		if listing.Actions == nil {
			got["actions"] = []any{}
		}
		return firstErr(expectEqual(c, "listing", got), expectEqual(c, "total", listing.Total),
			expectEqual(c, "limit", listing.Limit), expectEqual(c, "offset", listing.Offset))
	default:
		return fmt.Errorf("%w: discovery operation %q", errUnsupported, op)
	}
}

// decodeArgs fills m from the suite's keyword arguments, which are the
// document's member names. An unknown argument is an error, not ignored.
func decodeArgs(args map[string]any, m *arsia.AgentMetadata) error {
	str := func(k string, dst *string) error {
		if v, ok := args[k]; ok {
			s, ok := v.(string)
			if !ok {
				return fmt.Errorf("%w: args.%s is not a string", errUnsupported, k)
			}
			*dst = s
		}
		return nil
	}
	strs := func(k string, dst *[]string) error {
		v, ok := args[k]
		if !ok {
			return nil
		}
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("%w: args.%s is not a list", errUnsupported, k)
		}
		*dst = make([]string, len(list))
		for i, e := range list {
			if (*dst)[i], ok = e.(string); !ok {
				return fmt.Errorf("%w: args.%s[%d] is not a string", errUnsupported, k, i)
			}
		}
		return nil
	}
	integer := func(k string, dst *int64) error {
		if v, ok := args[k]; ok {
			n, ok := v.(int)
			if !ok {
				return fmt.Errorf("%w: args.%s is not an integer", errUnsupported, k)
			}
			*dst = int64(n)
		}
		return nil
	}
	// features and rate_limits go through JSON into the typed structs,
	// refusing unknown members.
	object := func(k string, dst any) error {
		v, ok := args[k]
		if !ok {
			return nil
		}
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("args.%s: %w", k, err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("args.%s: %w", k, err)
		}
		return nil
	}
	known := []string{"agent_id", "name", "version", "protocol_version", "inbox", "jwks", "capabilities_supported",
		"max_message_bytes", "request_timeout_ms", "server_min", "server_max", "features", "rate_limits",
		"compliance_profiles_supported"}
	for k := range args {
		if !slices.Contains(known, k) {
			return fmt.Errorf("%w: unknown argument args.%s", errUnsupported, k)
		}
	}
	if _, ok := args["features"]; ok {
		m.Features = &arsia.Features{}
	}
	if _, ok := args["rate_limits"]; ok {
		m.RateLimits = &arsia.RateLimits{}
	}
	return firstErr(
		str("agent_id", &m.AgentID), str("name", &m.Name), str("version", &m.Version),
		str("protocol_version", &m.ProtocolVersion), str("inbox", &m.Inbox), str("jwks", &m.JWKS),
		str("server_min", &m.ServerMin), str("server_max", &m.ServerMax),
		strs("capabilities_supported", &m.CapabilitiesSupported),
		strs("compliance_profiles_supported", &m.ComplianceProfilesSupported),
		integer("max_message_bytes", &m.MaxMessageBytes), integer("request_timeout_ms", &m.RequestTimeoutMS),
		object("features", m.Features), object("rate_limits", m.RateLimits),
	)
}

// checkDocument applies expected.required_keys, contains and absent_keys.
func checkDocument(c *arsiaCase, doc map[string]any) error {
	if keys, ok := c.Expected["required_keys"].([]any); ok {
		for _, k := range keys {
			name, _ := k.(string)
			if _, present := doc[name]; !present {
				return fmt.Errorf("required key %q is missing", name)
			}
		}
	}
	if want, ok := c.Expected["contains"].(map[string]any); ok {
		for k, w := range want {
			got, present := doc[k]
			if !present {
				return fmt.Errorf("contains: key %q is missing", k)
			}
			if !sameJSON(got, w) {
				return fmt.Errorf("contains.%s: got %s, want %s", k, compactJSON(got), compactJSON(w))
			}
		}
	}
	if keys, ok := c.Expected["absent_keys"].([]any); ok {
		for _, k := range keys {
			name, _ := k.(string)
			if _, present := doc[name]; present {
				return fmt.Errorf("key %q should be absent, got %s", name, compactJSON(doc[name]))
			}
		}
	}
	return nil
}
