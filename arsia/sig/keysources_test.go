package sig

import (
	"context"
	"errors"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

func TestKeySources(t *testing.T) {
	key := &jose.JSONWebKey{KeyID: "agent:a.b#k"}
	unknown := KeySourceFunc(func(context.Context, string) (*jose.JSONWebKey, error) { return nil, ErrUnknownKid })
	revoked := KeySourceFunc(func(context.Context, string) (*jose.JSONWebKey, error) { return nil, ErrRevokedKey })
	known := KeySourceFunc(func(context.Context, string) (*jose.JSONWebKey, error) { return key, nil })
	for name, tc := range map[string]struct {
		ks      KeySources
		want    *jose.JSONWebKey
		wantErr error
	}{
		"none":                {nil, nil, ErrUnknownKid},
		"second knows it":     {KeySources{unknown, known}, key, nil},
		"revoked stops":       {KeySources{revoked, known}, nil, ErrRevokedKey},
		"nobody knows it":     {KeySources{unknown, unknown}, nil, ErrUnknownKid},
		"first answer counts": {KeySources{known, revoked}, key, nil},
	} {
		k, err := tc.ks.Key(t.Context(), "agent:a.b#k")
		if k != tc.want || (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
			t.Errorf("%s: %v, %v", name, k, err)
		}
	}
}
