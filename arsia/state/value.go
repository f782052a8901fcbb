package state

import (
	"fmt"

	"github.com/custos-runtime/custos/jcs"
)

// MaxValueBytes is the largest serialized value, in bytes (ARSIA-State
// §2.1.2, §2.3): 1 MiB of UTF-8 JSON.
const MaxValueBytes = 1 << 20

// CanonicalValue checks that v is a JSON value an entry may hold and
// returns its RFC 8785 canonical form, whose length is the value's size.
//
// v is a decoded JSON value (map[string]any, []any, string, bool, nil,
// float64, json.Number, Go integers). NaN, infinities, invalid UTF-8,
// numbers that do not survive a trip through an IEEE double, nesting
// deeper than jcs.DefaultMaxDepth and any other Go type fail with
// ErrInvalidValue: binary data must travel as a base64 string. A canonical
// form longer than MaxValueBytes fails with ErrValueTooLarge (wire code
// payload_too_large). The size is measured on the canonical form so that
// every implementation measures the same bytes.
func CanonicalValue(v any) ([]byte, error) {
	c, err := jcs.CanonicalizeValue(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidValue, err)
	}
	if len(c) > MaxValueBytes {
		return nil, fmt.Errorf("%w: serialized value is %d bytes, more than %d", ErrValueTooLarge, len(c), MaxValueBytes)
	}
	return c, nil
}

// CheckValue is CanonicalValue without the canonical bytes.
func CheckValue(v any) error {
	_, err := CanonicalValue(v)
	return err
}
