package learn

// EngineFor exposes engineFor to the external tests.
var EngineFor = engineFor
