package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/duraton/duraton/delivery"
	"github.com/duraton/duraton/server"
	"github.com/duraton/duraton/storage"
)

// claimDataDir records which mode owns the data directory and refuses the other mode
// unless switchMode is set: `dev` puts the public dev token and signing keys into the
// file, so a production directory must never meet it by accident, and a dev directory
// is no production database either. Whenever `serve` owns the file, the public dev token
// is revoked and the public dev signing keys are replaced (the new ones are printed).
func claimDataDir(m mode, dir string, switchMode bool, store *storage.Store, stdout io.Writer) error {
	devHash := server.TokenHash(devToken)
	var owner mode
	var hasDevToken bool
	err := store.View(func(tx *storage.Tx) error {
		owner = mode(tx.Mode())
		_, err := tx.TokenProject(devHash)
		hasDevToken = err == nil
		if owner != "" {
			return nil
		}
		// Files from before the mode was recorded: the dev token tells.
		projects, err := tx.Projects()
		if len(projects) > 0 {
			owner = modeServe
			if hasDevToken {
				owner = modeDev
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if owner != "" && owner != m && !switchMode {
		why := "it would make the public dev token and signing keys valid on it"
		if m == modeServe {
			why = "its token and signing keys are the public dev ones"
		}
		return fmt.Errorf("data directory %s belongs to `duraton %s`; `duraton %s` refuses it because %s. "+
			"Use another --data directory, or pass --switch-mode to hand this one over to `duraton %s`", dir, owner, m, why, m)
	}
	var newKeys *delivery.Project
	err = store.Update(func(tx *storage.Tx) error {
		newKeys = nil
		if err := tx.SetMode(string(m)); err != nil {
			return err
		}
		if m != modeServe {
			return nil
		}
		if err := tx.DeleteToken(devHash); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		p, err := tx.Project(devProject)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if p.CurrentSigningKey != devCurrentKey && p.NextSigningKey != devNextKey {
			return nil
		}
		p.CurrentSigningKey, p.NextSigningKey = delivery.NewSigningKey(), delivery.NewSigningKey()
		newKeys = p
		return tx.PutProject(p)
	})
	if err != nil {
		return err
	}
	if m == modeServe && hasDevToken {
		fmt.Fprintf(stdout, "revoked the public dev token of this data directory\n")
	}
	if newKeys != nil {
		fmt.Fprintf(stdout, "replaced the public dev signing keys of project %q; give your endpoints the new ones:\ncurrent signing key: %s\nnext signing key: %s\n",
			newKeys.ID, newKeys.CurrentSigningKey, newKeys.NextSigningKey)
	}
	return nil
}
