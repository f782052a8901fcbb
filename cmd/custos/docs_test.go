package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The repository's root, from this package.
const repoRoot = "../.."

// docFiles are README.md and every Markdown file under docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, f := range []string{"README.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md"} {
		files = append(files, filepath.Join(repoRoot, f))
	}
	err := filepath.WalkDir(filepath.Join(repoRoot, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// Every relative link in README.md and docs/ names a file or directory
// that exists.
func TestDocsRelativeLinks(t *testing.T) {
	checked := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				checked++
				if _, err := os.Stat(filepath.Join(filepath.Dir(f), target)); err != nil {
					t.Errorf("%s:%d: the link %s names nothing: %v", f, i+1, m[1], err)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found: the checker no longer sees them", checked)
	}
}

// shellWords splits a command line as sh would for the simple commands the
// README quotes: quotes, backslashes, a comment, and it stops at the first
// operator (|, >, <, &, ;) or command substitution. ok is false when the
// line uses what it does not understand.
func shellWords(line string) (words []string, ok bool) {
	var cur strings.Builder
	inWord, quote := false, byte(0)
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			flush()
			return words, true
		case strings.IndexByte("|><&;", c) >= 0:
			flush()
			return words, true
		case c == '$' || c == '`':
			return nil, false
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, false
	}
	flush()
	return words, true
}

// readmeCommands returns the custos command lines README.md quotes: in
// sh blocks (continuation lines joined; "go run ./cmd/custos" counts as
// custos) and in inline code spans.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds []string
	add := func(s string) {
		s = strings.TrimSpace(s)
		s = strings.TrimPrefix(s, "$ ")
		if rest, ok := strings.CutPrefix(s, "go run ./cmd/custos "); ok {
			s = "custos " + rest
		}
		if strings.HasPrefix(s, "custos ") {
			cmds = append(cmds, s)
		}
	}
	inline := regexp.MustCompile("`((?:go run \\./cmd/)?custos [^`]+)`")
	sc := bufio.NewScanner(f)
	fence, pending := "", ""
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if fence == "" {
				fence = strings.TrimPrefix(trimmed, "```")
			} else {
				fence = ""
			}
			continue
		}
		if fence == "" {
			for _, m := range inline.FindAllStringSubmatch(line, -1) {
				add(m[1])
			}
			continue
		}
		if fence != "sh" {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			pending += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		add(pending + line)
		pending = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cmds
}

// Every custos command the README quotes is one this build has, with flags
// it knows, and its --help succeeds.
func TestReadmeCommandsParse(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) < 20 {
		t.Fatalf("only %d custos commands found in README.md: the extractor no longer sees them", len(cmds))
	}
	for _, line := range cmds {
		words, ok := shellWords(line)
		if !ok || len(words) < 2 {
			continue // a line using shell the checker does not follow
		}
		args := words[1:]
		root := newRootCommand()
		finishRoot(root)
		c, rest, err := root.Find(args)
		if err != nil {
			t.Errorf("README: %s: %v", line, err)
			continue
		}
		if err := c.ParseFlags(rest); err != nil {
			t.Errorf("README: %s: %v", line, err)
			continue
		}
		if c.HasSubCommands() && len(c.Flags().Args()) > 0 {
			t.Errorf("README: %s: %q is no subcommand of %s", line, c.Flags().Args()[0], c.CommandPath())
			continue
		}
		if code := run(context.Background(), append(args, "--help"), strings.NewReader(""), io.Discard, io.Discard); code != 0 {
			t.Errorf("README: %s --help: exit %d", line, code)
		}
	}
}

// The checks themselves: a wrong command and a dead link are caught.
func TestDocsCheckers(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		ok   bool
	}{
		{`custos serve --config custos.yaml &   # data`, []string{"custos", "serve", "--config", "custos.yaml"}, true},
		{`custos envelope new --args '{"text":"hi"}' > req.json`, []string{"custos", "envelope", "new", "--args", `{"text":"hi"}`}, true},
		{`custos approvals list   # finds it`, []string{"custos", "approvals", "list"}, true},
		{`custos x $(cat y)`, nil, false},
	} {
		got, ok := shellWords(tc.line)
		if ok != tc.ok || strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
			t.Errorf("shellWords(%q) = %q, %v", tc.line, got, ok)
		}
	}
	root := newRootCommand()
	finishRoot(root)
	c, rest, _ := root.Find([]string{"approvals", "lsit"})
	if err := c.ParseFlags(rest); err != nil || !c.HasSubCommands() || len(c.Flags().Args()) == 0 {
		t.Errorf("a misspelt subcommand would pass: %s %v", c.CommandPath(), c.Flags().Args())
	}
	c, rest, _ = root.Find([]string{"serve", "--no-such-flag"})
	if err := c.ParseFlags(rest); err == nil {
		t.Error("an unknown flag would pass")
	}
}
