// Package onboarding implements the onboarding of external agents in
// ARSIA (ARSIA-Identity §4.2, §7 to §9): how a gateway decides whether an
// agent from another organization may work with its agents, and with
// which capabilities.
//
// # The idea
//
// An ARSIA agent names what it wants to do with capabilities such as
// "notes.read" or "payments.charge". Before an external agent gets an
// access token for any of them, the receiving organization's gateway runs
// it through six phases, in a fixed order that MUST NOT be changed or
// shortened (Phases, PhaseTracker, CheckPhaseOrder):
//
//  1. discovery_and_identity: fetch the agent's discovery document,
//     identity record and keys, check the record's signature, and read
//     its EU AI Act classification (six steps: Phase1Steps, StepTracker);
//  2. compliance_conformance: check that the agent's messages follow the
//     protocol and its compliance rules;
//  3. capability_scoping: compare what the agent asks for with the
//     organization's CapabilityPolicy (Evaluate);
//  4. provenance: check that the agent's identity is older than its audit
//     history (VerifyProvenance); informational only;
//  5. decision: approve or deny (BuildDecisionPayload) and, on approval,
//     issue an access token scoped to the granted capabilities
//     (IssueToken);
//  6. operational: the agent works within its grant.
//
// The first phase that fails ends the flow with a denial that names the
// phase and a reason (DenialReasons); later phases never overturn it.
//
// # Classification
//
// Every identity record carries an AI system classification: minimal-,
// limited-, high- or unacceptable-risk. CheckProfileRequirement applies
// ARSIA-Identity §4.2: a high-risk agent must declare a compliance
// profile (such as EU-AI-ACT-HIGH-RISK), and an unacceptable-risk agent
// is never onboarded. ClassificationConsistent checks that an agent does
// not claim a higher class than its identity record (ARSIA-Core §4.3.8
// R6).
//
// # Capability policies
//
// A CapabilityPolicy lists capabilities with a status: allowed,
// oversight_required (granted, but each use waits for a human approval)
// or prohibited, optionally with a max_risk_level above which the
// capability counts as prohibited. ParsePolicy and PolicyFromMap check a
// policy against its JSON Schema and refuse duplicate capabilities and
// misuse of the reserved "arsiaprotocol." namespace. Evaluate is deny by
// default: an unlisted capability is not granted, a prohibited one denies
// the whole request, and a request that ends up with nothing granted is
// denied with no_permitted_capabilities; a partial grant is an approval.
//
// # Decisions, tokens and audit
//
// A Payload records the outcome: decision, agent_id, policy_version, the
// granted capabilities, the token lifetime, the deciding phase and, when
// denied, denial_reason. It never contains a token. IssueToken signs the
// access token of an approved payload through package auth, with the
// granted capabilities as its scope and a lifetime no longer than the
// policy allows. AuditEvents lists the seven onboarding audit events.
//
// # Failing closed
//
// Nothing in this package reads the clock (times are parameters), panics
// on input, or grants on doubt: an invalid policy grants nothing, an
// unknown classification is refused, and an inconsistent decision input
// is an error. Every error wraps one of the sentinels (ErrInvalidPolicy,
// ErrProfileRequired, ErrPhaseOrder, ...).
//
// # Where Custos uses it
//
// Today only the ARSIA conformance run (package conformance, custos
// conformance arsia) uses this package: custos serve does not serve onboarding
// yet. It is a complete library of the module, checked against the
// upstream suite, waiting for the gateway to offer it.
package onboarding
