package arsia

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// ProtocolVersion is the wire version this package speaks.
const ProtocolVersion = "1.0"

// Version is a wire protocol version "major.minor" (Core §4.1.1).
type Version struct {
	Major, Minor int
}

// String returns "major.minor".
func (v Version) String() string { return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) }

// Compare returns -1, 0 or +1 as v is older than, equal to or newer than o.
func (v Version) Compare(o Version) int {
	if c := cmp.Compare(v.Major, o.Major); c != 0 {
		return c
	}
	return cmp.Compare(v.Minor, o.Minor)
}

// current is ProtocolVersion as a Version.
var current = Version{1, 0}

// ParseVersion parses "major.minor": two runs of ASCII digits and one dot.
// "1" and "1.0.0" fail, as do signs, spaces and numbers beyond 9 digits;
// leading zeros are allowed ("01.0" is 1.0). Errors wrap ErrInvalidVersion.
func ParseVersion(s string) (Version, error) {
	major, minor, ok := strings.Cut(s, ".")
	if !ok || !versionNumber(major) || !versionNumber(minor) {
		return Version{}, fmt.Errorf("%w: %s is not of the form major.minor", ErrInvalidVersion, pyRepr(truncateForMessage(s)))
	}
	ma, _ := strconv.Atoi(major)
	mi, _ := strconv.Atoi(minor)
	return Version{ma, mi}, nil
}

func versionNumber(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// CompareVersions parses a and b and compares them: -1, 0 or +1.
func CompareVersions(a, b string) (int, error) {
	va, err := ParseVersion(a)
	if err != nil {
		return 0, err
	}
	vb, err := ParseVersion(b)
	if err != nil {
		return 0, err
	}
	return va.Compare(vb), nil
}

// IsCompatible reports whether a peer speaking theirs, which demands at
// least theirMinV ("" when it sets no min_v), can talk to us speaking ours:
// same major version, and ours not below their floor.
func IsCompatible(ours, theirs, theirMinV string) (bool, error) {
	o, err := ParseVersion(ours)
	if err != nil {
		return false, err
	}
	t, err := ParseVersion(theirs)
	if err != nil {
		return false, err
	}
	if o.Major != t.Major {
		return false, nil
	}
	if theirMinV == "" {
		return true, nil
	}
	m, err := ParseVersion(theirMinV)
	if err != nil {
		return false, err
	}
	return o.Compare(m) >= 0, nil
}

// VersionRange is what a receiver supports: server_min and server_max of
// its discovery document.
type VersionRange struct {
	Min, Max Version
}

// SupportedVersions returns the range this package supports: 1.0 to 1.0.
func SupportedVersions() VersionRange { return VersionRange{Min: current, Max: current} }

// Details is r as the supported_versions member of a not_implemented
// error's details ({"min": ..., "max": ...}), which Core §11.2 requires.
func (r VersionRange) Details() map[string]any {
	return map[string]any{"min": r.Min.String(), "max": r.Max.String()}
}

// Negotiate applies Core §7.4 to a message's v and min_v ("" when absent):
// it is accepted when supported.Min ≤ v and, if min_v is set, min_v ≤
// supported.Max. Custos also refuses a v whose major version is above
// supported.Max's (L2 unsupported_protocol_version): a new major version
// changes the wire format, so "newer minor, same major" is the only
// forward compatibility. A refusal is an *Error with code not_implemented
// and details {supported_versions{min,max}, requested_version,
// requested_min_version}, wrapping ErrUnsupportedVersion; an unparsable v
// or min_v is refused the same way.
func Negotiate(v, minV string, supported VersionRange) error {
	refuse := func(why string) error {
		var reqMin any
		if minV != "" {
			reqMin = truncateForMessage(minV)
		}
		return &Error{
			Code:        CodeNotImplemented,
			Description: "Protocol version " + why + "; this agent supports " + supported.Min.String() + " to " + supported.Max.String() + ".",
			Details: map[string]any{
				"supported_versions":    supported.Details(),
				"requested_version":     truncateForMessage(v),
				"requested_min_version": reqMin,
			},
			Err: ErrUnsupportedVersion,
		}
	}
	pv, err := ParseVersion(v)
	if err != nil {
		return refuse(truncateForMessage(v) + " is not a valid version")
	}
	if pv.Compare(supported.Min) < 0 {
		return refuse(pv.String() + " is older than the oldest supported")
	}
	if pv.Major > supported.Max.Major {
		return refuse(pv.String() + " has an unsupported major version")
	}
	if minV != "" {
		pm, err := ParseVersion(minV)
		if err != nil {
			return refuse("minimum " + truncateForMessage(minV) + " is not a valid version")
		}
		if pm.Compare(supported.Max) > 0 {
			return refuse("minimum " + pm.String() + " is newer than the newest supported")
		}
	}
	return nil
}
