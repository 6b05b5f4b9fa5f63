// Package report tells the results of sim runs: the measures derived from
// a run's steps (Measure: connection attempts and requests on held
// streams apart, the peak over steps with enough attempts, how long
// failures lasted, the busiest origin's share), a verdict per run in
// words (Verdict), what was simulated (Describe), terminal tables
// (SummaryTable, narrow or wide; TenantTable; SeriesTable, drawn with
// internal/report), JSON, and a self-contained HTML report whose charts
// are drawn by internal/chart (Charts for one run, Compare across the
// variants of a sweep, View for the part of the run where things happen).
// WriteDir writes result.json and report.html and is what most callers
// want.
//
// The package holds no state; its functions are safe for concurrent use on
// different results.
package report
