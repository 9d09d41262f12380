//! Users and roles as mongorestore restores them: it loads `admin.system.users` /
//! `roles` from the dump into temporary collections (`admin.tempusers`,
//! `admin.temproles`), then runs `_mergeAuthzCollections` (mongo-tools
//! `mongorestore/metadata.go` `RestoreUsersOrRoles`). The merge is ported from
//! `CmdMergeAuthzCollections` (`src/mongo/db/commands/user_management_commands.cpp`):
//!
//! - `db: ""` means every database, else only users/roles whose `db` is that one;
//! - without `drop`, each temp user is inserted; one that already exists (same
//!   `user`+`db`) is skipped with a warning ("Match the behavior of mongorestore to
//!   continue on failure");
//! - with `drop`, an existing user is replaced by the temp one, and users of the
//!   selected databases that are not in the temp collection are removed;
//! - the same for roles (`role`+`db`);
//! - first, like every user-management command (`requireWritableAuthSchema28SCRAM`),
//!   `admin.system.version` gets `{_id: "authSchema", currentVersion: 5}` if it has
//!   none (8.1+ no longer writes it, SERVER-83663; the stand-in plays ≤ 8.0).
//!
//! Credentials are stored, never checked: the stand-in has no real authentication.

use super::state::{CmdError, CmdResult, State};
use super::writes;
use bson::{doc, Bson, Document};

/// The authz collection a merge writes into, with its unique name index.
struct Target {
    coll: &'static str,
    name_field: &'static str,
    index: &'static str,
}

const USERS: Target = Target {
    coll: "system.users",
    name_field: "user",
    index: "user_1_db_1",
};
const ROLES: Target = Target {
    coll: "system.roles",
    name_field: "role",
    index: "role_1_db_1",
};

/// Create `admin.system.users` or `roles` as the server does on first use: an `_id`
/// index and a unique `{user|role: 1, db: 1}` index.
fn ensure_target(st: &mut State, t: &Target) -> CmdResult<()> {
    if st.store.exists("admin", t.coll) {
        return Ok(());
    }
    writes::create_collection(st, "admin", t.coll, Document::new(), None)?;
    writes::create_index(
        st,
        "admin",
        t.coll,
        doc! {"v": 2, "unique": true, "key": {t.name_field: 1, "db": 1}, "name": t.index},
    )?;
    Ok(())
}

/// `{_id: "authSchema", currentVersion: 5}` in `admin.system.version`, if missing.
pub fn ensure_auth_schema(st: &mut State) -> CmdResult<()> {
    writes::ensure_collection(st, "admin", "system.version")?;
    let id = Bson::String("authSchema".into());
    let present = st
        .store
        .get("admin", "system.version")
        .and_then(|c| c.find_id(&id))
        .is_some();
    if !present {
        let _ = writes::insert_doc(
            st,
            "admin",
            "system.version",
            doc! {"_id": "authSchema", "currentVersion": 5},
        );
    }
    Ok(())
}

fn key_of(d: &Document, name_field: &str) -> Option<(String, String)> {
    Some((
        d.get_str(name_field).ok()?.to_string(),
        d.get_str("db").ok()?.to_string(),
    ))
}

fn merge_one(st: &mut State, temp_ns: &str, t: &Target, db: &str, drop: bool) -> CmdResult<()> {
    let (tdb, tcoll) = super::store::split_ns(temp_ns);
    let temp: Vec<Document> = st
        .store
        .get(tdb, tcoll)
        .map(|c| c.iter().map(|(_, d)| d.into_owned()).collect())
        .unwrap_or_default();
    ensure_target(st, t)?;
    let in_scope = |d: &Document| db.is_empty() || d.get_str("db") == Ok(db);
    let existing: Vec<(u64, (String, String))> = st
        .store
        .get("admin", t.coll)
        .map(|c| {
            c.iter()
                .filter(|(_, d)| in_scope(d))
                .filter_map(|(r, d)| key_of(&d, t.name_field).map(|k| (r, k)))
                .collect()
        })
        .unwrap_or_default();
    let mut to_drop: Vec<(u64, (String, String))> = if drop { existing.clone() } else { vec![] };
    for d in temp.into_iter().filter(|d| in_scope(d)) {
        let Some(key) = key_of(&d, t.name_field) else {
            continue;
        };
        let found = existing.iter().find(|(_, k)| *k == key).map(|(r, _)| *r);
        match found {
            Some(rid) if drop => writes::replace_doc(st, "admin", t.coll, rid, d),
            Some(_) => {
                st.logger.log(
                    "W",
                    "ACCESS",
                    20511,
                    "conn",
                    "Could not insert user during _mergeAuthzCollections command",
                    serde_json::json!({"user": format!("{}@{}", key.0, key.1), "error": "DuplicateKey"}),
                );
            }
            None => {
                let _ = writes::insert_doc(st, "admin", t.coll, d);
            }
        }
        to_drop.retain(|(_, k)| *k != key);
    }
    for (rid, _) in to_drop {
        writes::delete_doc(st, "admin", t.coll, rid);
    }
    Ok(())
}

/// The `_mergeAuthzCollections` command (admin database only).
pub fn merge_authz_collections(st: &mut State, cmd: &Document) -> CmdResult<()> {
    let str_arg = |k: &str| -> CmdResult<String> {
        match cmd.get(k) {
            None => Ok(String::new()),
            Some(Bson::String(s)) => Ok(s.clone()),
            Some(_) => Err(CmdError::type_mismatch(format!("\"{k}\" must be a string"))),
        }
    };
    let users = str_arg("tempUsersCollection")?;
    let roles = str_arg("tempRolesCollection")?;
    let db = str_arg("db")?;
    let drop = matches!(cmd.get("drop"), Some(Bson::Boolean(true)));
    if users.is_empty() && roles.is_empty() {
        return Err(CmdError::bad_value(
            "Must provide at least one of \"tempUsersCollection\" and \"tempRolescollection\"",
        ));
    }
    ensure_auth_schema(st)?;
    if !users.is_empty() {
        merge_one(st, &users, &USERS, &db, drop)?;
    }
    if !roles.is_empty() {
        merge_one(st, &roles, &ROLES, &db, drop)?;
    }
    Ok(())
}
