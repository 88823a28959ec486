/** Sluice's version, as `package.json` says it (a unit test holds them equal): for /metrics' `sluice_build_info`. */
export const SLUICE_VERSION = '0.1.0';
