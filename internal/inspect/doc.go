// Package inspect judges a regionsync fleet from the management cluster: what kubectl regionsync
// status, explain and doctor report, apart from the command that parses their flags and prints
// their JSON and YAML.
//
// LoadFleet reads the fleet (every shard Lease and every Region, one list each). Explain says
// which region's shard takes an object and why (or why none), then whether its copy is claimed,
// current, paused, held or fought over; ReadExplainInput reads what it judges. Status (BuildStatus
// on a Fleet already read) is the fleet at a glance; Doctor reports what needs a person. The Write
// functions give each report's text form.
package inspect
