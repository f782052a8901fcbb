package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// selfCommand is how the user can run this program again, for the
// commands printed by serve and demo: "custos" when the custos on the PATH
// is this program, "go run ./cmd/custos" when it was built by go run (or
// go test), else the path it was started by. installed reports whether
// "custos" is on the PATH as this program.
func selfCommand() (cmd string, installed bool) {
	exe, err := os.Executable()
	if err != nil {
		return "custos", false
	}
	if onPath, err := exec.LookPath("custos"); err == nil && sameFile(onPath, exe) {
		return "custos", true
	}
	if inGoBuildCache(exe) {
		return "go run ./cmd/custos", false
	}
	if a := os.Args[0]; strings.ContainsRune(a, filepath.Separator) {
		return a, false
	}
	return exe, false
}

// inGoBuildCache reports whether exe is a binary go run or go test built
// in a temporary work directory.
func inGoBuildCache(exe string) bool {
	for _, part := range strings.Split(filepath.ToSlash(exe), "/") {
		if strings.HasPrefix(part, "go-build") {
			return true
		}
	}
	return false
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
