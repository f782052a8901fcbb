package arsia

import (
	"github.com/custos-runtime/custos/arsia/compliance"
	"github.com/custos-runtime/custos/arsia/schema"
)

// Issue codes of Validate beyond those of ValidateSemantic.
const (
	// IssueEncryptedPayload: the payload is still a JWE; verify and decrypt
	// before validating.
	IssueEncryptedPayload = "encrypted_payload"
)

// ValidateOptions configures Validate. The zero value is the lenient
// receiver of the reference validator with the bundled profiles.
type ValidateOptions struct {
	// Strict makes an unknown compliance profile an error (rule R1)
	// instead of a fallback to GDPR-STANDARD.
	Strict bool
	// Profiles is the compliance profile registry; nil means the bundled
	// ARSIA profiles.
	Profiles *compliance.Registry
	// IdentityClassification is the sender's agent-level
	// ai_system_classification from its identity record; when set, rule R6
	// refuses a message that claims a higher class.
	IdentityClassification string
	// Semantic tunes the L2 rules.
	Semantic SemanticOptions
}

// Validate is the receiver's structural and semantic check of a decoded
// envelope (ParseEnvelope), in the reference validator's order:
//
//  1. a non-object is invalid_envelope_type;
//  2. an encrypted payload is encrypted_payload and nothing else, because
//     nothing about a JWE string can be judged before decryption;
//  3. L1, the ARSIA JSON Schema: when it finds anything, its issues
//     (schema_violation, in "<pointer>: <message>" form) are returned alone;
//  4. L2, ValidateSemantic, then the compliance rules R1-R7 on the
//     effective (inherited) compliance.
//
// Signatures are not checked here: verify first (arsia/sig), then validate.
func Validate(env any, opts ValidateOptions) []Issue {
	var l issueList
	m, ok := env.(map[string]any)
	if !ok {
		l.err(issueInvalidEnvelopeType, "", "envelope must be a JSON object, got "+pyRepr(env))
		return l
	}
	if sec, _ := m["security"].(map[string]any); sec != nil && sec["encrypted"] == true {
		if _, isJWE := m["payload"].(string); isJWE {
			l.err(IssueEncryptedPayload, "/payload", "payload is encrypted: verify the signature and decrypt it before validating")
			return l
		}
	}
	for _, e := range schema.ValidateEnvelope(m) {
		l = append(l, Issue{Code: IssueSchemaViolation, Pointer: e.Pointer, Message: e.String(),
			Severity: SeverityError, Keyword: e.Keyword, Params: e.Params})
	}
	if len(l) > 0 {
		return l
	}
	l = append(l, ValidateSemantic(m, opts.Semantic)...)
	for _, v := range compliance.Validate(m, opts.Profiles, compliance.Options{
		Strict:                 opts.Strict,
		IdentityClassification: opts.IdentityClassification,
	}) {
		l.err(v.Code, "/compliance", v.Message)
	}
	return l
}
