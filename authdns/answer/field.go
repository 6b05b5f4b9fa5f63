package answer

import "fmt"

// Field names a field of Config or Record that some policies read; a
// FieldError says which field is wrong.
type Field uint8

// The fields. FieldPolicy and FieldRecords are read by every policy.
const (
	FieldPolicy      Field = iota // Config.Policy
	FieldRecords                  // Config.Records
	FieldN                        // Config.N
	FieldDealer                   // Config.Dealer
	FieldLocations                // Config.Locations
	FieldWeight                   // Record.Weight
	FieldSecondary                // Record.Secondary
	FieldLocation                 // Record.Location
	FieldBigN                     // Config.BigN
	FieldBigSubset                // Config.BigSubset
	FieldBigLeaveOut              // Config.BigLeaveOut
	numFields
)

var fieldNames = [numFields]string{"policy", "records", "n", "shuffle dealer", "locations", "weight", "secondary", "location", "big n", "big weighted subset", "big leave out"}

// String returns the field's name in lower case ("weight").
func (f Field) String() string {
	if f < numFields {
		return fieldNames[f]
	}
	return fmt.Sprintf("field %d", uint8(f))
}

// fieldSet is a set of fields.
type fieldSet uint16

func fields(fs ...Field) fieldSet {
	var s fieldSet
	for _, f := range fs {
		s |= 1 << f
	}
	return s
}

func (s fieldSet) has(f Field) bool { return s&(1<<f) != 0 }

// FieldError is a problem with one field of a Config. Its Error starts with
// "answer: "; callers that map fields to their own configuration keys
// report Msg under the key of Field (and of Record, when not -1).
type FieldError struct {
	// Record is the index of the record whose field is wrong, -1 for a
	// field of the Config.
	Record int
	// Field is the field that is wrong.
	Field Field
	// Msg says what is wrong, without the package prefix.
	Msg string
}

func (e *FieldError) Error() string {
	if e.Record >= 0 {
		return fmt.Sprintf("answer: record %d: %s", e.Record, e.Msg)
	}
	return "answer: " + e.Msg
}

// setErr is a FieldError of a field of the Config.
func setErr(f Field, format string, args ...any) error {
	return &FieldError{Record: -1, Field: f, Msg: fmt.Sprintf(format, args...)}
}

// recErr is a FieldError of record i.
func recErr(i int, f Field, format string, args ...any) error {
	return &FieldError{Record: i, Field: f, Msg: fmt.Sprintf(format, args...)}
}
