package broker

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/zonemq/zonemq/internal/store"
)

// instanceMetadata is the data directory's identity, made once.
const instanceMetadata = "instance"

// instanceRecord is what instanceMetadata holds.
type instanceRecord struct {
	ID string `json:"id"`
}

// loadInstance returns the data directory's id, making and persisting one
// (fsynced) on first start. It travels with every registration: a name
// server refuses a group's slot to another data directory while this one
// recently held it, so a second process started with a copied config is
// refused instead of taking over (docs/security.md §1).
func loadInstance(st *store.Store) (string, error) {
	var rec instanceRecord
	found, err := st.LoadMetadata(instanceMetadata, &rec)
	if err != nil {
		return "", fmt.Errorf("reading the instance id: %w", err)
	}
	if found && rec.ID != "" {
		return rec.ID, nil
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making the instance id: %w", err)
	}
	rec.ID = hex.EncodeToString(b[:])
	if err := st.SaveMetadata(instanceMetadata, rec); err != nil {
		return "", fmt.Errorf("persisting the instance id: %w", err)
	}
	return rec.ID, nil
}
