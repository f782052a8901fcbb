package identity

import (
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/schema"
	"github.com/custos-runtime/custos/jcs"
)

// IdentityRecordSchema is the embedded schema of an identity record.
const IdentityRecordSchema = "arsia-identity-record.schema.json"

// MaxRecordBytes caps an identity record document (a chain of
// MaxChainLength certificates of MaxPEMBytes fits).
const MaxRecordBytes = 1 << 20

// timeLayout is the identity record's timestamp form: RFC 3339 in UTC with
// exactly three fractional digits.
const timeLayout = "2006-01-02T15:04:05.000Z"

// AI system classifications of the EU AI Act, weakest first.
const (
	MinimalRisk      = "minimal-risk"
	LimitedRisk      = "limited-risk"
	HighRisk         = "high-risk"
	UnacceptableRisk = "unacceptable-risk"
)

var classifications = []string{MinimalRisk, LimitedRisk, HighRisk, UnacceptableRisk}

// IdentityRecord binds an agent's technical identity (agent id), its legal
// identity (owner, jurisdiction, deployer) and its compliance identity (AI
// Act classification), and may carry the X.509 chain that lifts it to L2
// or L3 (ARSIA-Identity §1.2, served at GET /.well-known/arsia/identity).
type IdentityRecord struct {
	AgentID string
	// OwnerID is a legal entity identifier (VAT number, EIN, LEI URN...).
	OwnerID   string
	OwnerName string
	// Jurisdiction is the ISO 3166-1 alpha-2 code of the owner's
	// registration.
	Jurisdiction           string
	AISystemClassification string
	// DeployerID and DeployerName name the deploying entity when it is
	// not the owner; DeployerName is required with DeployerID.
	DeployerID   string
	DeployerName string
	// CreatedAt is created_at, the record's creation time, which
	// onboarding compares with the agent's audit history (the suites call
	// it identity_created_at). Millisecond precision, UTC.
	CreatedAt time.Time
	// ValidUntil is the record's expiry; the zero time means none.
	ValidUntil time.Time
	// ContactEmail is a role address (not a person's).
	ContactEmail string
	// CertificateChain holds PEM certificates, leaf first. Nil is absent;
	// empty is published as [].
	CertificateChain []string
}

// ParseIdentityRecord decodes data strictly (duplicate member names,
// non-interoperable numbers and documents over MaxRecordBytes are
// refused), checks it against the identity record schema and Validate,
// and returns the record. Errors wrap ErrInvalidRecord.
func ParseIdentityRecord(data []byte) (*IdentityRecord, error) {
	v, err := (&jcs.Options{MaxSize: MaxRecordBytes}).Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidRecord)
	}
	return IdentityRecordFromMap(m)
}

// IdentityRecordFromMap is ParseIdentityRecord for an already decoded
// document.
func IdentityRecordFromMap(m map[string]any) (*IdentityRecord, error) {
	if err := checkSchema(m); err != nil {
		return nil, err
	}
	// The schema has fixed the members and their types.
	str := func(k string) string { s, _ := m[k].(string); return s }
	r := &IdentityRecord{
		AgentID:                str("agent_id"),
		OwnerID:                str("owner_id"),
		OwnerName:              str("owner_name"),
		Jurisdiction:           str("jurisdiction"),
		AISystemClassification: str("ai_system_classification"),
		DeployerID:             str("deployer_id"),
		DeployerName:           str("deployer_name"),
		ContactEmail:           str("contact_email"),
	}
	var err error
	if r.CreatedAt, err = parseTime("created_at", str("created_at")); err != nil {
		return nil, err
	}
	if s, ok := m["valid_until"].(string); ok {
		if r.ValidUntil, err = parseTime("valid_until", s); err != nil {
			return nil, err
		}
	}
	if chain, ok := m["certificate_chain"].([]any); ok {
		r.CertificateChain = make([]string, len(chain))
		for i, c := range chain {
			r.CertificateChain[i], _ = c.(string)
		}
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

func parseTime(name, s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s %q is not a timestamp: %w", ErrInvalidRecord, name, s, err)
	}
	return t, nil
}

func checkSchema(m map[string]any) error {
	errs, err := schema.Validate(m, IdentityRecordSchema)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidRecord, schema.Join(errs))
	}
	return nil
}

// Validate checks r against the identity record schema and the rules the
// schema cannot state: the agent id grammar, the classification, a
// contact_email that is a bare address, and valid_until after created_at.
// Errors wrap ErrInvalidRecord.
func (r *IdentityRecord) Validate() error {
	if r == nil {
		return fmt.Errorf("%w: nil record", ErrInvalidRecord)
	}
	if _, err := arsia.ParseAgentID(r.AgentID); err != nil {
		return fmt.Errorf("%w: agent_id: %w", ErrInvalidRecord, err)
	}
	if !slices.Contains(classifications, r.AISystemClassification) {
		return fmt.Errorf("%w: ai_system_classification %q is not one of %s", ErrInvalidRecord, r.AISystemClassification, strings.Join(classifications, ", "))
	}
	if r.CreatedAt.IsZero() {
		return fmt.Errorf("%w: created_at is not set", ErrInvalidRecord)
	}
	if !r.ValidUntil.IsZero() && !r.ValidUntil.After(r.CreatedAt) {
		return fmt.Errorf("%w: valid_until is not after created_at", ErrInvalidRecord)
	}
	if r.ContactEmail != "" {
		a, err := mail.ParseAddress(r.ContactEmail)
		if err != nil || a.Name != "" || a.Address != r.ContactEmail {
			return fmt.Errorf("%w: contact_email %q is not a bare e-mail address", ErrInvalidRecord, r.ContactEmail)
		}
	}
	return checkSchema(r.Map())
}

// ValidAt reports whether the record is in force at now: not before
// created_at and, when valid_until is set, not after it. The error wraps
// ErrRecordExpired.
func (r *IdentityRecord) ValidAt(now time.Time) error {
	switch {
	case now.Before(r.CreatedAt):
		return fmt.Errorf("%w: created_at %s is after %s", ErrRecordExpired, r.CreatedAt.Format(timeLayout), now.UTC().Format(timeLayout))
	case !r.ValidUntil.IsZero() && now.After(r.ValidUntil):
		return fmt.Errorf("%w: valid_until %s has passed", ErrRecordExpired, r.ValidUntil.Format(timeLayout))
	}
	return nil
}

// Map returns the record in the generic JSON form, timestamps in UTC with
// milliseconds (finer precision is truncated) and optional members only
// when set.
func (r *IdentityRecord) Map() map[string]any {
	m := map[string]any{
		"agent_id":                 r.AgentID,
		"owner_id":                 r.OwnerID,
		"owner_name":               r.OwnerName,
		"jurisdiction":             r.Jurisdiction,
		"ai_system_classification": r.AISystemClassification,
		"created_at":               r.CreatedAt.UTC().Format(timeLayout),
	}
	opt := map[string]string{"deployer_id": r.DeployerID, "deployer_name": r.DeployerName, "contact_email": r.ContactEmail}
	for k, v := range opt {
		if v != "" {
			m[k] = v
		}
	}
	if !r.ValidUntil.IsZero() {
		m["valid_until"] = r.ValidUntil.UTC().Format(timeLayout)
	}
	if r.CertificateChain != nil {
		chain := make([]any, len(r.CertificateChain))
		for i, c := range r.CertificateChain {
			chain[i] = c
		}
		m["certificate_chain"] = chain
	}
	return m
}

// ClaimedTrustLevel is ClassifyChain of the record's chain: what the record
// claims, unverified.
func (r *IdentityRecord) ClaimedTrustLevel() TrustLevel { return ClassifyChain(r.CertificateChain) }

// VerifyTrustLevel is VerifyChain of the record's chain for the record's
// agent. opts.AgentID, when set, must be the record's agent_id.
func (r *IdentityRecord) VerifyTrustLevel(opts VerifyOptions) (TrustLevel, error) {
	if opts.AgentID != "" && opts.AgentID != r.AgentID {
		return L1, fmt.Errorf("%w: record is for %q, not %q", ErrIdentityMismatch, r.AgentID, opts.AgentID)
	}
	opts.AgentID = r.AgentID
	return VerifyChain(r.CertificateChain, opts)
}

// CheckLayers checks that the three identity layers of Identity §1.1
// agree: the envelope's from, the agent named by the signature's kid (the
// part before '#') and the identity record's agent_id (skipped when rec is
// nil). A disagreement is an *arsia.Error with code unauthorized wrapping
// ErrIdentityMismatch; its description is generic, the details of what
// disagreed stay in the wrapped error for logs.
func CheckLayers(from, kid string, rec *IdentityRecord) error {
	var recordID string
	if rec != nil {
		recordID = rec.AgentID
		if recordID == "" {
			recordID = "<empty agent_id>"
		}
	}
	problems := arsia.CheckIdentityConsistency(from, kid, recordID)
	if _, err := arsia.ParseAgentID(from); err != nil {
		problems = append([]string{err.Error()}, problems...)
	}
	if len(problems) == 0 {
		return nil
	}
	info, _ := arsia.LookupError(arsia.CodeUnauthorized)
	return &arsia.Error{
		Code:        arsia.CodeUnauthorized,
		Description: info.Description,
		Err:         fmt.Errorf("%w: %s", ErrIdentityMismatch, strings.Join(problems, "; ")),
	}
}
