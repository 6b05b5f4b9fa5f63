// Package archtest holds no code, only a test: it checks that every import
// of the module points down the four floors of docs/architecture.md, so the
// policy libraries never come to depend on a server, and that imports on
// one floor follow its rules: the servers and the SDK import none of each
// other, and the libraries import each other only as the document lists.
package archtest
