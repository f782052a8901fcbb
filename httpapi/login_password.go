package httpapi

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"

	"github.com/custos-runtime/custos/aais"
)

// Argon2id parameters of HashPassword (the OWASP minimum: 19 MiB, two
// passes, one lane).
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// HashPassword returns the argon2id hash of password in the PHC string
// format ("$argon2id$v=19$m=19456,t=2,p=1$SALT$HASH"), the form
// reviewers' password_hash settings take.
func HashPassword(password string) (string, error) {
	return hashPassword(password, argonMemory, argonTime, argonThreads)
}

func hashPassword(password string, memory, passes uint32, threads uint8) (string, error) {
	if password == "" {
		return "", errors.New("httpapi: empty password")
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, passes, memory, threads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, memory, passes, threads,
		enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// argonHash is a parsed argon2id PHC string.
type argonHash struct {
	memory, passes uint32
	threads        uint8
	salt, key      []byte
}

func parseArgon(h string) (argonHash, error) {
	var a argonHash
	parts := strings.Split(h, "$")
	// "", "argon2id", "v=19", "m=…,t=…,p=…", salt, key
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return a, errors.New("not an argon2id hash")
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return a, errors.New("unsupported argon2 version")
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &a.memory, &a.passes, &a.threads); err != nil {
		return a, errors.New("bad argon2id parameters")
	}
	// Bound the work a configured hash can demand (1 GiB, 10 passes).
	if a.memory < 8 || a.memory > 1<<20 || a.passes < 1 || a.passes > 10 || a.threads < 1 {
		return a, errors.New("argon2id parameters out of range")
	}
	var err error
	enc := base64.RawStdEncoding
	if a.salt, err = enc.DecodeString(parts[4]); err != nil || len(a.salt) < 8 {
		return a, errors.New("bad argon2id salt")
	}
	if a.key, err = enc.DecodeString(parts[5]); err != nil || len(a.key) < 16 || len(a.key) > 64 {
		return a, errors.New("bad argon2id key")
	}
	return a, nil
}

// checkPasswordHash reports whether hash is an argon2id or bcrypt hash
// this package can verify.
func checkPasswordHash(hash string) error {
	if strings.HasPrefix(hash, "$argon2id$") {
		_, err := parseArgon(hash)
		return err
	}
	if _, err := bcrypt.Cost([]byte(hash)); err != nil {
		return errors.New("not an argon2id or bcrypt hash")
	}
	return nil
}

// verifyPassword reports whether password matches hash (argon2id or
// bcrypt), comparing in constant time.
func verifyPassword(hash, password string) bool {
	if strings.HasPrefix(hash, "$argon2id$") {
		a, err := parseArgon(hash)
		if err != nil {
			return false
		}
		key := argon2.IDKey([]byte(password), a.salt, a.passes, a.memory, a.threads, uint32(len(a.key)))
		return subtle.ConstantTimeCompare(key, a.key) == 1
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

// PasswordEntry is one reviewer who may sign in with a password.
type PasswordEntry struct {
	Actor aais.Actor
	// Hash is HashPassword's argon2id string, or a bcrypt hash.
	Hash string
}

// Passwords verifies reviewers' passwords against their hashes. At most a
// few verifications run at once: each costs memory (argon2id) or CPU.
type Passwords struct {
	byID map[string]PasswordEntry
	// swapped, once set, replaces byID (Replace).
	swapped atomic.Pointer[map[string]PasswordEntry]
	dummy   string
	slots   chan struct{}
}

// NewPasswords builds a Passwords; every entry needs an actor id and type
// and a hash checkPasswordHash accepts.
func NewPasswords(entries []PasswordEntry) (*Passwords, error) {
	p := &Passwords{byID: map[string]PasswordEntry{}, slots: make(chan struct{}, 4)}
	for _, e := range entries {
		if e.Actor.ID == "" || e.Actor.Type == "" {
			return nil, errors.New("httpapi: a password without an actor id or type")
		}
		if _, dup := p.byID[e.Actor.ID]; dup {
			return nil, fmt.Errorf("httpapi: two passwords for %s", e.Actor.ID)
		}
		if err := checkPasswordHash(e.Hash); err != nil {
			return nil, fmt.Errorf("httpapi: the password hash of %s: %w", e.Actor.ID, err)
		}
		p.byID[e.Actor.ID] = e
		if p.dummy == "" {
			p.dummy = e.Hash
		}
	}
	return p, nil
}

// Verify returns the actor whose id and password these are. An unknown id
// costs as much as a wrong password, so timing does not tell which ids
// exist.
func (p *Passwords) Verify(id, password string) (aais.Actor, bool) {
	if p == nil || len(p.table()) == 0 {
		return aais.Actor{}, false
	}
	p.slots <- struct{}{}
	defer func() { <-p.slots }()
	e, ok := p.table()[id]
	if !ok {
		verifyPassword(p.dummy, password)
		return aais.Actor{}, false
	}
	if !verifyPassword(e.Hash, password) {
		return aais.Actor{}, false
	}
	return e.Actor, true
}
