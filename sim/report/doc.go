// Package report renders the results of sim runs: terminal tables
// (SummaryTable, TenantTable, SeriesTable, drawn with internal/report),
// PNG and SVG charts drawn with gonum/plot (Figures for one run, Compare
// across the variants of a sweep), JSON, and a self-contained HTML report
// with the SVG charts embedded. WriteDir writes all of them into a folder
// and is what most callers want.
//
// The package holds no state; its functions are safe for concurrent use on
// different results.
package report
