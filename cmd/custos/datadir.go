package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/store"
)

// One rule names the data directory for every command that keeps or
// reads state (serve, approvals, audit): the --data flag, else
// $CUSTOS_DATA, else ./custos-data (config.DefaultDataDir), relative to
// the working directory. So "custos serve" and then "custos approvals
// list" in the same directory look at the same custos.db.

// dataDirHelp is the sentence the --help of those commands shows.
const dataDirHelp = `The data directory is --data DIR, else $CUSTOS_DATA, else ./custos-data
(the one custos serve uses when started in the same directory); the state
is the SQLite file custos.db in it.`

// dataDirUsage is the --data flag's usage line.
const dataDirUsage = "the data directory (default $CUSTOS_DATA, else ./" + config.DefaultDataDir + ")"

// dataDir is the --data flag of a command.
type dataDir struct {
	flag string
	cmd  *cobra.Command
}

// register adds --data to cmd, for its subcommands too.
func (d *dataDir) register(cmd *cobra.Command) {
	d.cmd = cmd
	cmd.PersistentFlags().StringVar(&d.flag, "data", "", dataDirUsage)
}

// given reports whether --data was on the command line.
func (d *dataDir) given() bool { return d.cmd != nil && d.cmd.PersistentFlags().Changed("data") }

// resolve returns the data directory, absolute, and where its name came
// from, for messages.
func (d *dataDir) resolve() (dir, from string, err error) {
	switch {
	case d.given():
		if d.flag == "" {
			return "", "", usageError{errors.New("--data: an empty directory name")}
		}
		dir, from = d.flag, "--data"
	case os.Getenv("CUSTOS_DATA") != "":
		dir, from = os.Getenv("CUSTOS_DATA"), "$CUSTOS_DATA"
	default:
		dir, from = config.DefaultDataDir, "the default ./"+config.DefaultDataDir
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", fmt.Errorf("the data directory %s: %w", dir, err)
	}
	return abs, from, nil
}

// stateFile is the state file of the data directory.
func (d *dataDir) stateFile() (path, from string, err error) {
	dir, from, err := d.resolve()
	if err != nil {
		return "", "", err
	}
	return filepath.Join(dir, store.StateFile), from, nil
}

// missingState reports, for a location a reading command was given,
// whether nothing is there: neither the file nor, for a state file, the
// files of the layout before it (approvals.db, audit.db), which opening
// migrates. A location that is not a local file never counts as missing.
func missingState(l store.Location, oldNames ...string) (bool, error) {
	if l.Kind != store.KindSQLite && l.Kind != store.KindFile {
		return false, nil
	}
	_, err := os.Stat(l.Path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if filepath.Base(l.Path) == store.StateFile {
		for _, n := range oldNames {
			if _, err := os.Stat(filepath.Join(filepath.Dir(l.Path), n)); err == nil {
				return false, nil
			}
		}
	}
	return true, nil
}

// noStateError is what a command that reads state answers when the state
// it was pointed at does not exist (it creates none): where it looked and
// how to point it elsewhere.
func noStateError(what, path, from, flag string) error {
	hint := ""
	if os.Getenv("CUSTOS_DATA") == "" && os.Getenv("CUSTOS_DATA_DIR") != "" {
		hint = "; $CUSTOS_DATA_DIR is no longer read, set $CUSTOS_DATA"
	}
	return fmt.Errorf("no %s at %s (%s); custos serve creates it in its data directory: "+
		"run this where custos serve runs, or name that directory with --data (or %s)%s", what, path, from, flag, hint)
}
