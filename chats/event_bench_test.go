package chats

import (
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkEventJSON encodes one event of each type (the goldens) afresh:
// the cost of Event.JSON, paid once per event however many subscribers
// receive it.
func BenchmarkEventJSON(b *testing.B) {
	evs := goldenEvents()
	size := 0
	for _, ev := range evs {
		size += len(ev.JSON())
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range evs {
			ev.once, ev.raw = sync.Once{}, nil // encode afresh
			_ = ev.JSON()
		}
	}
}

// BenchmarkRowBytes encodes the golden record's events as rows (text_at
// instead of repeated texts).
func BenchmarkRowBytes(b *testing.B) {
	evs := goldenRowEvents()
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range evs {
			ev.once, ev.raw = sync.Once{}, nil
			_ = rowBytes(ev)
		}
	}
}

// BenchmarkDecodeRows decodes the golden record's rows (the rows a load, a
// snapshot page or a since replay reads), text_at references included.
func BenchmarkDecodeRows(b *testing.B) {
	db, rows := loadGoldenRows(b)
	size := 0
	for _, r := range rows {
		size += len(r[1])
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	err := db.View(func(tx *bolt.Tx) error {
		rb := tx.Bucket(bucketRecords).Bucket([]byte("c_golden"))
		for b.Loop() {
			for _, r := range rows {
				if _, err := decodeRow(rb, "c_golden", r[0], r[1]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
