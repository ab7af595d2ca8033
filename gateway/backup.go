package gateway

import (
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/mirror-gateway/mirror/chats/dbcheck"
	bolt "go.etcd.io/bbolt"
)

// The database routes: while the gateway runs it holds the database's lock,
// so `mirror backup` and `mirror check` ask it here. Both need the token.
//
//	GET /api/backup  a consistent copy of the database file, application/octet-stream
//	GET /api/check   the check of the tree the gateway reads now, a dbcheck.Report as JSON
//
// Both read inside one read transaction: the copy is the database as of
// that transaction while chats go on writing, and the pages the check reads
// are pinned by it (bbolt frees no page a live transaction can reach).

// DatabaseRoutes are the routes above for db, the gateway's database.
func DatabaseRoutes(db *bolt.DB) []Route {
	return []Route{
		{Pattern: "GET /api/backup", Handler: backupHandler(db), Private: true, Owner: true},
		{Pattern: "GET /api/check", Handler: checkHandler(db), Private: true, Owner: true},
	}
}

func backupHandler(db *bolt.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started := false
		err := db.View(func(tx *bolt.Tx) error {
			h := w.Header()
			h.Set("Content-Type", "application/octet-stream")
			h.Set("Content-Disposition", `attachment; filename="mirror.db"`)
			h.Set("Cache-Control", "no-store")
			// The exact length: a copy cut short is an error at the client.
			h.Set("Content-Length", strconv.FormatInt(tx.Size(), 10))
			// A big database takes longer than the server's write limit,
			// which is set for ordinary answers.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
			started = true
			_, err := tx.WriteTo(w)
			return err
		})
		if err != nil && !started {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the database: " + err.Error()})
		}
		// Once started, a failed copy arrives short of its Content-Length,
		// and the client refuses it.
	})
}

func checkHandler(db *bolt.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep *dbcheck.Report
		err := db.View(func(tx *bolt.Tx) error {
			f, err := os.Open(db.Path())
			if err != nil {
				return err
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			ps := db.Info().PageSize
			rep = dbcheck.CheckTree(f, fi.Size(), ps, uint64(tx.Cursor().Bucket().Root()), uint64(tx.Size())/uint64(ps))
			rep.Txid = uint64(tx.ID())
			return nil
		})
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read the database: " + err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, rep)
	})
}
