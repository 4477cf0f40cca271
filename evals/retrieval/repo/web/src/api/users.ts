import { ApiClient, ApiError } from "./client";

export interface User {
  id: number;
  accountId: number;
  email: string;
  role: "owner" | "admin" | "member";
  emailVerified: boolean;
}

interface UserDto {
  id: number;
  account_id: number;
  email: string;
  role: User["role"];
  email_verified_at: string | null;
}

// The API speaks snake_case; the UI speaks camelCase. Convert at this boundary only.
export function toUser(dto: UserDto): User {
  return {
    id: dto.id,
    accountId: dto.account_id,
    email: dto.email,
    role: dto.role,
    emailVerified: dto.email_verified_at !== null,
  };
}

// Returns null for a missing or deleted user instead of throwing, so pages can render "unknown user".
export async function getUserById(client: ApiClient, id: number): Promise<User | null> {
  try {
    return toUser(await client.get<UserDto>(`/users/${id}`));
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) return null;
    throw err;
  }
}

export async function getCurrentUser(client: ApiClient): Promise<User> {
  return toUser(await client.get<UserDto>("/users/me"));
}

export async function updateUserProfile(
  client: ApiClient,
  id: number,
  changes: { email?: string },
): Promise<User> {
  return toUser(await client.request<UserDto>(`/users/${id}`, { method: "PUT", body: changes }));
}

export async function listTeamMembers(client: ApiClient, cursor?: string): Promise<{ users: User[]; nextCursor: string | null }> {
  const query = cursor ? `?cursor=${encodeURIComponent(cursor)}` : "";
  const page = await client.get<{ data: UserDto[]; next_cursor: string | null }>(`/users${query}`);
  return { users: page.data.map(toUser), nextCursor: page.next_cursor };
}
